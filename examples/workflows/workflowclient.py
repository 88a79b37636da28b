"""A workflow client for EMCO's workflow manager, and a Temporal worker beside it.

EMCO's workflowmgr starts a workflow by posting the intent's ``spec.temporal`` to
``http://{clientEndpointName}:{clientEndpointPort}/invoke/{workflowClientName}``; the client
starts the workflow on its Temporal server and answers 204. This module is such a client for
any set of workflows written with Temporal's Python SDK (``temporalio``):

    python workflowclient.py --temporal 127.0.0.1:7233 --port 9090 --task-queue EMCO_Q

serves ``/invoke/{name}`` for the workflows registered in ``WORKFLOWS`` (``migrate`` from
``migrate.py``) and runs a worker for them on the task queue. Another module can register its
own workflows and call ``main``. A start request becomes
``client.start_workflow(name, spec, id=ID, task_queue=TaskQueue, ...)``: the workflow gets the
whole ``spec.temporal`` (``workflowParams`` included) as its one argument.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from temporalio.client import Client
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

#: Workflow classes by the client name EMCO's intents use.
WORKFLOWS: dict[str, type] = {}
#: Activity functions the worker runs.
ACTIVITIES: list[Callable[..., Any]] = []


def _duration(nanoseconds: Any) -> timedelta | None:
    """A Go ``time.Duration`` (nanoseconds) as Temporal's option; 0 is unset."""
    if not nanoseconds:
        return None
    return timedelta(microseconds=int(nanoseconds) / 1000)


async def start(client: Client, name: str, spec: dict[str, Any]) -> None:
    """Starts workflow ``name`` with Go's ``StartWorkflowOptions`` of ``spec``."""
    options = spec.get("workflowStartOptions") or {}
    retry = options.get("RetryPolicy")
    policy = None
    if retry:
        policy = RetryPolicy(
            initial_interval=_duration(retry.get("InitialInterval")) or timedelta(seconds=1),
            backoff_coefficient=float(retry.get("BackoffCoefficient") or 2.0),
            maximum_interval=_duration(retry.get("MaximumInterval")),
            maximum_attempts=int(retry.get("MaximumAttempts") or 0),
            non_retryable_error_types=retry.get("NonRetryableErrorTypes") or None,
        )
    await client.start_workflow(
        WORKFLOWS[name].run,  # type: ignore[attr-defined]
        spec,
        id=options.get("ID") or f"{name}-workflow",
        task_queue=options["TaskQueue"],
        execution_timeout=_duration(options.get("WorkflowExecutionTimeout")),
        run_timeout=_duration(options.get("WorkflowRunTimeout")),
        task_timeout=_duration(options.get("WorkflowTaskTimeout")),
        id_reuse_policy=WorkflowIDReusePolicy(
            options.get("WorkflowIDReusePolicy") or WorkflowIDReusePolicy.ALLOW_DUPLICATE
        ),
        retry_policy=policy,
        cron_schedule=options.get("CronSchedule") or "",
        memo=options.get("Memo") or None,
    )


def serve(client: Client, loop: asyncio.AbstractEventLoop, port: int) -> ThreadingHTTPServer:
    """The ``/invoke/{name}`` endpoint on 127.0.0.1:``port`` (0: a free one)."""

    class Invoke(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            name = self.path.removeprefix("/invoke/")
            if not self.path.startswith("/invoke/") or name not in WORKFLOWS:
                self._answer(404, f"no workflow client {name!r}\n")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                spec = json.loads(self.rfile.read(length) or b"{}")
                asyncio.run_coroutine_threadsafe(start(client, name, spec), loop).result(30)
            except Exception as e:  # the caller gets the reason, as EMCO's clients answer
                self._answer(500, f"cannot start {name}: {e}\n")
                return
            self._answer(204, "")

        def _answer(self, status: int, text: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write("workflowclient: " + format % args + "\n")

    server = ThreadingHTTPServer(("127.0.0.1", port), Invoke)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def run(temporal: str, port: int, task_queue: str) -> None:
    """Serves the endpoint and runs the worker until the process is stopped."""
    client = await Client.connect(temporal)
    server = serve(client, asyncio.get_running_loop(), port)
    # The test harness and scripts read the port from this line.
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS.values()),
        activities=ACTIVITIES,
        # Activities written as plain functions (blocking HTTP calls) run on threads.
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=8),
        # Workflows defined in a script are not re-importable by the sandbox.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    await worker.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temporal", required=True, help="host:port of the Temporal frontend")
    parser.add_argument("--port", type=int, default=9090, help="the /invoke port (0: any)")
    parser.add_argument("--task-queue", required=True, help="the task queue the worker polls")
    args = parser.parse_args()
    asyncio.run(run(args.temporal, args.port, args.task_queue))


if __name__ == "__main__":
    # The workflow modules register in the importable copy of this module, not in __main__.
    import workflowclient as importable
    import migrate  # noqa: F401  (registers `migrate`)

    importable.main()
