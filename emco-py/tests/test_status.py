"""A status as a table with the reasons of what fails or retries, in a terminal and in a
notebook, from a full status answer (EMCO's StatusResult: src/orchestrator/pkg/status)."""

from emco._status import parse_status

DOC = {
    "name": "d1",
    "states": {"actions": [{"state": "Created"}, {"state": "Instantiated"}]},
    "deployedStatus": "Instantiating",
    "readyStatus": "NotReady",
    "apps": [{"name": "web", "clusters": [
        {"clusterProvider": "p", "cluster": "c1", "readyStatus": "Available", "resources": [
            {"name": "web", "GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"},
             "deployedStatus": "Applied", "readyStatus": "Ready"}]},
        {"clusterProvider": "p", "cluster": "c2", "readyStatus": "Retrying", "resources": [
            {"name": "web", "GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"},
             "deployedStatus": "Retrying", "readyStatus": "NotReady",
             "reason": "Unreachable", "message": "connection refused", "attempts": 3,
             "nextRetry": "2026-11-26T18:00:00Z"}]},
    ]}],
}


def test_a_status_says_why_a_resource_retries() -> None:
    status = parse_status(DOC)
    assert (status.state, status.deployed_status, status.ready) == (
        "Instantiated", "Instantiating", False)
    [failing] = status.failures()
    assert (failing.reason, failing.attempts) == ("Unreachable", 3)
    why = "web p+c2 Deployment/web: Retrying Unreachable: connection refused " \
          "(attempt 3, next at 2026-11-26T18:00:00Z)"
    assert status.why() == [why]
    text = str(status).splitlines()
    assert text[0] == "d1: Instantiated, Instantiating, NotReady"
    assert text[1].split() == ["APP", "p+c1", "p+c2"]
    assert text[2].split() == ["web", "1/1", "ready", "0/1", "ready"]
    assert text[3] == why
    html = status._repr_html_()
    assert "<li>web p+c2 Deployment/web: Retrying Unreachable" in html
