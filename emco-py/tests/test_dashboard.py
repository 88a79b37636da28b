"""The dashboard (`/ui/` of emco-server, emco-service/ui) in headless Chromium from Debian's
packages, driven by Playwright: the deployment matrix fills live while kubesim clusters take
an instantiate, the actions on the page take effect on the clusters, and a cluster that cannot
be reached says why. Every page must load without a console error; a failing test leaves a
screenshot in target/ui/."""

import os
from pathlib import Path
from typing import Iterator, List

import pytest

import emco
from conftest import (
    ADMIN_TOKEN,
    ALICE_TOKEN,
    PROVIDER,
    ROOT,
    Fleet,
    Server,
    Temporal,
    _start_server,
    on,
    web_group,
)

try:
    from playwright.sync_api import Locator, Page, expect, sync_playwright
except ImportError:
    # scripts/test.sh installs Playwright (the library only: the browser is Debian's).
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "target" / "ui"
DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/http-server"
# As the machine's notes say: without these Chromium keeps calling out to a closed network.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Browser:
    """A page in Chromium, with the console errors it logged."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: List[str] = []
        # Console errors a test provokes on purpose (Chromium logs every 4xx answer).
        self.expected: List[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        # Every action asks first; the test says yes.
        page.on("dialog", lambda d: d.accept())


@pytest.fixture
def browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = chromium.new_page(viewport={"width": 1366, "height": 800})
        page.set_default_timeout(30_000)
        # The status stream settles bursts for a second and rereads the record every two.
        expect.set_options(timeout=15_000)
        b = Browser(page)
        try:
            yield b
        finally:
            report = getattr(request.node, "rep_call", None)
            if report is None or report.failed:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"{request.node.name}-failure.png"),
                                full_page=True)
            chromium.close()
    unexpected = [e for e in b.errors if not any(x in e for x in b.expected)]
    assert unexpected == [], b.errors


def cell(page: Page, cluster: str) -> Locator:
    return page.locator(f'button.cell[data-cluster="kubesim+{cluster}"]')


def test_the_matrix_fills_live_and_the_actions_take_effect(
    server: Server, fleet: Fleet, browser: Browser
) -> None:
    page = browser.page
    with emco.Client(server.url) as client:
        dig = web_group(client, fleet)

        page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
        expect(page.locator("#dig-state")).to_contain_text("Created")
        page.click("button[data-action=approve]")
        expect(page.locator("#message")).to_contain_text("approve: accepted (202)")
        expect(page.locator("#dig-state")).to_contain_text("Approved")
        expect(page.locator("#matrix")).to_contain_text("Nothing deployed")

        # Instantiate from the page: the matrix fills without a reload, to Ready on both.
        page.click("button[data-action=instantiate]")
        expect(page.locator("#message")).to_contain_text("instantiate: accepted (202)")
        expect(page.locator("button.cell")).to_have_count(2)
        expect(page.locator("button.cell.ok")).to_have_count(2, timeout=60_000)
        expect(cell(page, "c1")).to_have_text("✔ Ready")
        expect(page.locator("[data-tile=ready] b")).to_have_text("2")
        assert fleet.get("c1", DEPLOYMENT) is not None
        assert "live · updated" in page.locator("#live").inner_text()

        # Drill down to the resources of one cell, by keyboard.
        cell(page, "c2").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#detail-title")).to_have_text("http-server on kubesim+c2")
        expect(page.locator("#resources")).to_contain_text("Deployment")
        expect(page.locator("#resources tbody tr").first).to_contain_text("Applied")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "dashboard.png"))

        # Update to revision 2 (only c1), then roll back to revision 1 from the page.
        client.set_placement(dig, "http-server", on("c1"))
        page.click("button[data-action=update]")
        expect(page.locator("#message")).to_contain_text("update: accepted (202): revision 2")
        expect(page.locator("button.cell")).to_have_count(1, timeout=60_000)
        assert fleet.get("c2", DEPLOYMENT) is None
        page.select_option("#revision", "1")
        page.click("button[data-action=rollback]")
        expect(page.locator("#message")).to_contain_text("rollback: accepted (202)")
        expect(page.locator("button.cell.ok")).to_have_count(2, timeout=60_000)
        expect(page.locator("#history-table")).to_contain_text("Updated")

        # The other pages.
        page.goto(f"{server.url}/ui/#/")
        expect(page.locator("#deployments")).to_contain_text("d1")
        expect(page.locator("#deployments")).to_contain_text("Healthy")
        expect(page.locator('[data-tile="clusters reachable"] b')).to_have_text("2")
        page.goto(f"{server.url}/ui/#/fleet")
        expect(page.locator("#fleet-count")).to_have_text("2 of 2 clusters match.")
        page.fill("input[name=q]", "c2")
        page.press("input[name=q]", "Enter")
        expect(page.locator("#fleet-count")).to_have_text("1 of 2 clusters match.")
        expect(page.locator("#clusters tbody")).to_contain_text("reachable")
        expect(page.locator("#clusters tbody")).to_contain_text("edge")
        # What runs on a cluster.
        page.click("#clusters a:text-is('c2')")
        expect(page.locator("#cluster-deployments")).to_contain_text("d1")
        expect(page.locator("#cluster-deployments")).to_contain_text("http-server")
        expect(page.locator("#cluster-deployments")).to_contain_text("Applied")
        page.goto(f"{server.url}/ui/#/projects")
        expect(page.locator("[data-project=p]")).to_contain_text("http-server")
        expect(page.locator("[data-project=p]")).to_contain_text("admin")
        page.click("text=d1")
        expect(page.locator("#dig-state")).to_contain_text("Updated")

        # Terminate from the page: nothing left on the clusters.
        page.click("button[data-action=terminate]")
        expect(page.locator("#message")).to_contain_text("terminate: accepted (202)")
        expect(page.locator("#dig-state")).to_contain_text("Terminated", timeout=60_000)
        assert client.wait(dig, ready=False, timeout=60).state == "Terminated"
        assert fleet.get("c1", DEPLOYMENT) is None and fleet.get("c2", DEPLOYMENT) is None


def test_an_unreachable_cluster_says_why_and_stop_ends_it(
    server: Server, fleet: Fleet, browser: Browser
) -> None:
    page = browser.page
    with emco.Client(server.url) as client:
        dig = web_group(client, fleet)
        fleet.set_down("c2")
        client.approve(dig)
        client.instantiate(dig)

        page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
        expect(cell(page, "c1")).to_have_text("✔ Ready", timeout=60_000)
        expect(cell(page, "c2")).to_have_text("⟳ Retrying", timeout=60_000)
        page.check("#problems")
        expect(page.locator("button.cell")).to_have_count(1)
        cell(page, "c2").click()
        expect(page.locator("#detail")).to_contain_text("Unreachable")
        expect(page.locator("#detail")).to_contain_text("next retry")

        page.goto(f"{server.url}/ui/#/")
        expect(page.locator("#deployments tbody tr").first).to_contain_text("In progress")
        page.goto(f"{server.url}/ui/#/fleet?reach=unreachable")
        expect(page.locator("#clusters tbody tr")).to_have_count(1)
        expect(page.locator("#clusters tbody tr")).to_contain_text("c2")
        expect(page.locator("#clusters tbody tr")).to_contain_text("unreachable")

        page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
        page.click("button[data-action=stop]")
        expect(page.locator("#message")).to_contain_text("stop: accepted (202)")
        expect(page.locator("#dig-state")).to_contain_text("InstantiateStopped", timeout=60_000)
        # A refused action answers with the server's message.
        browser.expected.append("status of 409 (Conflict)")
        page.click("button[data-action=instantiate]")
        expect(page.locator("#message")).to_contain_text("already been instantiated")
        # A stopped instantiate left its context InstantiateFailed: the overview says so.
        page.goto(f"{server.url}/ui/#/")
        expect(page.locator("#deployments tbody tr").first).to_contain_text("Failing")
        expect(page.locator("#deployments tbody tr").first).to_contain_text("InstantiateFailed")

        fleet.set_down("c2", down=False)
        client.terminate(dig)
        assert client.wait(dig, ready=False, timeout=120).state == "Terminated"


def test_a_secured_servers_dashboard_asks_for_a_token_and_shows_the_callers_projects(
    secured_server: Server, browser: Browser
) -> None:
    page = browser.page
    # Chromium logs the 401 answers of the page before its login, and the 403 of the fleet's
    # figures, which are not alice's to see.
    browser.expected += ["status of 401", "status of 403"]
    admin = emco.Client(secured_server.url, token=ADMIN_TOKEN)
    admin.create_project("p1")
    admin.create_project("p2")

    page.goto(f"{secured_server.url}/ui/#/projects")
    expect(page.locator("h1")).to_have_text("Log in")
    page.fill("#token", "wrong-token-0123456789")
    page.click("#login button[type=submit]")
    expect(page.locator("#login-message")).to_contain_text("not valid")

    page.fill("#token", ALICE_TOKEN)
    page.click("#login button[type=submit]")
    expect(page.locator("#who")).to_contain_text("alice")
    expect(page.locator("section[data-project=p1]")).to_have_count(1)
    expect(page.locator("section[data-project=p2]")).to_have_count(0)
    # The session is a cookie the page's scripts cannot read.
    assert page.evaluate("document.cookie") == ""
    # The overview without the fleet's figures.
    page.goto(f"{secured_server.url}/ui/#/")
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator("#view")).to_contain_text("deployments healthy")
    expect(page.locator("#view")).not_to_contain_text("clusters reachable")

    page.click("#logout")
    expect(page.locator("h1")).to_have_text("Log in")
    page.goto(f"{secured_server.url}/ui/#/fleet")
    expect(page.locator("h1")).to_have_text("Log in")


def test_the_preview_shows_what_an_update_would_change_and_changes_nothing(
    server: Server, fleet: Fleet, browser: Browser
) -> None:
    page = browser.page
    with emco.Client(server.url) as client:
        dig = web_group(client, fleet)
        client.approve(dig)
        client.instantiate(dig)
        assert client.wait(dig, timeout=120).ready
        client.set_placement(dig, "http-server", on("c1"))
        page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
        expect(page.locator("#dig-state")).to_contain_text("Instantiated")
        page.check("#dry-run")
        page.click("#preview-button")
        expect(page.locator("#message")).to_contain_text("preview: nothing was changed")
        expect(page.locator("#preview h2")).to_have_text("Preview: update from revision 1")
        expect(page.locator("#preview-summary")).to_contain_text("1 of 2 clusters change")
        expect(page.locator("#preview-placement")).to_contain_text(f"loses {PROVIDER}+c2")
        # Only deletions: no cluster has anything to check.
        expect(page.locator("#preview-dry-run")).to_have_text("✔ checked by 0 clusters")
        expect(page.locator("#preview details.change summary")).to_have_text(f"1 cluster: {PROVIDER}+c2")
        expect(page.locator("#preview pre.diff .del").first).to_contain_text("-apiVersion")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "preview.png"), full_page=True)
        assert fleet.get("c2", DEPLOYMENT) is not None
        assert client.status(dig).state == "Instantiated"


def test_a_drifted_object_is_marked_in_the_matrix_and_its_detail(
    server: Server, fleet: Fleet, browser: Browser
) -> None:
    page = browser.page
    with emco.Client(server.url) as client:
        dig = web_group(client, fleet)
        client.approve(dig)
        client.instantiate(dig)
        assert client.wait(dig, timeout=120).ready
        page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
        expect(cell(page, "c1")).to_have_text("✔ Ready")
        fleet.patch("c1", "/api/v1/namespaces/default/configmaps/http-server-page",
                    {"data": {"index.html": "changed by hand"}}, "kubectl-edit")
        expect(cell(page, "c1")).to_have_text("✔ Ready · ⚠ 1 drifted")
        expect(cell(page, "c2")).to_have_text("✔ Ready")
        cell(page, "c1").click()
        expect(page.locator("#resources td.drift")).to_contain_text(
            ["⚠ data.index.html changed by kubectl-edit at "])
        # The same from Python: the status answer names the field and who changed it.
        answer = client.query_status(dig, status="ready", cluster=f"{PROVIDER}+c1")
        drifted = [r for a in answer["apps"] for c in a["clusters"] for r in c["resources"]
                   if r.get("drift")]
        assert [(r["name"], r["drift"][0]["path"], r["drift"][0]["manager"])
                for r in drifted] == [("http-server-page", "data.index.html", "kubectl-edit")]
        typed = [r for a in client.status(dig).apps for c in a.clusters for r in c.resources
                 if r.drift]
        assert [(r.name, c.path, c.manager, c.removed) for r in typed for c in r.drift] == [
            ("http-server-page", "data.index.html", "kubectl-edit", False)]
        assert isinstance(typed[0].drift[0], emco.DriftedField) and typed[0].drift_corrections == 0


def canary_then_approval(client: emco.Client, fleet: Fleet, page: Page, url: str) -> None:
    """Group d1 over the fleet rolled out in two waves, c1 then the rest after an approval,
    instantiated and open on `page` until the rest waits for the approval."""
    dig = web_group(client, fleet)
    client.set_rollout_policy(dig, {
        "waves": [{"name": "canary", "clusters": ["c1"]}, {"name": "rest"}],
        "gates": {"approval": True}})
    client.approve(dig)
    client.instantiate(dig)
    page.goto(f"{url}/ui/#/dig/p/web/v1/d1")
    expect(page.locator("#rollout h2")).to_contain_text("WaitingForApproval", timeout=60_000)


def test_a_rollout_shows_its_waves_and_takes_an_approval_from_the_page(
    server: Server, fleet: Fleet, browser: Browser
) -> None:
    page = browser.page
    with emco.Client(server.url) as client:
        canary_then_approval(client, fleet, page, server.url)
        # The timeline: the canary through, the rest waiting for a person.
        expect(page.locator("#waves li[data-wave=canary]")).to_contain_text("Succeeded")
        expect(page.locator("#waves li[data-wave=rest]")).to_contain_text("WaitingForApproval")
        expect(page.locator("#waves li[aria-current]")).to_have_attribute("data-wave", "rest")
        assert fleet.get("c2", DEPLOYMENT) is None
        page.click("#rollout-actions button[data-control=approve]")
        expect(page.locator("#message")).to_contain_text("rollout approve: accepted (202)")
        expect(page.locator("#rollout h2")).to_contain_text("Succeeded", timeout=60_000)
        expect(page.locator("#rollout h2")).to_contain_text("2/2 clusters through")
        assert fleet.get("c2", DEPLOYMENT) is not None
        # Nothing to approve any more: the server's refusal is shown.
        browser.expected.append("409")
        page.click("#rollout-actions button[data-control=approve]")
        expect(page.locator("#message")).to_contain_text("rollout approve refused (409)")


def test_the_rollout_timeline_names_a_cluster_that_left(
    server: Server, tmp_path: Path, browser: Browser
) -> None:
    """A cluster deregistered while its wave waits for approval leaves the rollout instead of
    failing it, and the wave on the page says so."""
    (tmp_path / "three").mkdir()
    fleet = Fleet(tmp_path / "three", 3)
    try:
        page = browser.page
        with emco.Client(server.url) as client:
            canary_then_approval(client, fleet, page, server.url)
            client.delete_cluster_label(PROVIDER, "c3", "edge")
            client.delete_cluster(PROVIDER, "c3")
            page.click("#rollout-actions button[data-control=approve]")
            expect(page.locator("#rollout h2")).to_contain_text("Succeeded", timeout=60_000)
            expect(page.locator("#waves li[data-wave=rest]")).to_contain_text(
                f"left out, deregistered: {PROVIDER}+c3")
            assert fleet.get("c2", DEPLOYMENT) is not None
            assert fleet.get("c3", DEPLOYMENT) is None
    finally:
        fleet.stop()


def test_a_groups_workflows_show_their_state_and_history(
    tmp_path: Path, fleet: Fleet, temporal: Temporal, browser: Browser
) -> None:
    """The group's workflow intents and tac hooks with what the server's --temporal-server
    says of them; an intent started from the page."""
    page = browser.page
    for server in _start_server(tmp_path, "--temporal-server", temporal.address):
        with emco.Client(server.url) as client:
            dig = web_group(client, fleet)
            client.create_workflow_intent(dig, "backup", "127.0.0.1", temporal.client_port,
                                          "sleep", "backup-1", temporal.TASK_QUEUE,
                                          params={"sleep": {"seconds": "1"}})
            client.create_workflow_hook(dig, "cleanup", "post-termination", "127.0.0.1",
                                        temporal.client_port, "sleep", "cleanup-1",
                                        temporal.TASK_QUEUE)
            page.goto(f"{server.url}/ui/#/dig/p/web/v1/d1")
            row = page.locator('#workflows-table tr[data-workflow="backup"]')
            # Temporal does not know the workflow yet.
            expect(row).to_contain_text("Not started")
            browser.expected.append("404")
            row.locator("button[data-start]").click()
            expect(page.locator("#message")).to_contain_text("workflow backup started")
            client.workflow_status(dig, "backup", temporal.address, wait=True)
            page.click("#workflows-refresh")
            expect(row).to_contain_text("Completed")
            row.locator("details summary").click()
            expect(row.locator("ol.events")).to_contain_text("WorkflowExecutionCompleted")
            hook = page.locator('#workflows-table tr[data-workflow="cleanup"]')
            expect(hook).to_contain_text("post-termination")
            expect(hook).to_contain_text("Not started")
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "workflows.png"), full_page=True)
            # The page's status streams end before this server stops.
            page.goto("about:blank")
