"""Interop harness: starts our real felix-broker and runs scenarios against it.

Each scenario file makes one Broker (a temporary data directory, free ports chosen by the
broker: every listener binds port 0) and hands it to its scenarios in order. `run()` runs
them all, prints one PASS/FAIL line each and exits non-zero if any failed, so ctest shows
every failure, not only the first.

Paths come from the environment ctest sets (tests/interop/CMakeLists.txt):
FELIX_BROKER_BIN (felix-broker) and FELIX_CLI_BIN (felix).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

START_TIMEOUT_S = 30.0


def require_env(name):
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"interop: {name} is not set (run through ctest)")
    return value


class Broker:
    """One felix-broker process; `settings` are extra FELIX_* variables."""

    def __init__(self, settings=None, name="interop"):
        self.dir = tempfile.mkdtemp(prefix=f"felix-{name}-")
        self.data_dir = os.path.join(self.dir, "data")
        self.settings = dict(settings or {})
        self.process = None
        self.start()

    def start(self):
        env = dict(os.environ)
        env.update({
            "FELIX_DATA_DIR": self.data_dir,
            "FELIX_QUIC_BIND": "127.0.0.1:0",
            "FELIX_INTERNAL_BIND": "127.0.0.1:0",
            "FELIX_BROKER_METRICS_BIND": "127.0.0.1:0",
            "FELIX_DURABLE_FSYNC_MODE": "none",
        })
        env.update(self.settings)
        self.stdout_path = os.path.join(self.dir, "broker.out")
        self.stderr_path = os.path.join(self.dir, "broker.err")
        # stdout fresh per start (its "listening" line names this start's ports); stderr kept.
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen([require_env("FELIX_BROKER_BIN")], env=env,
                                            stdout=out, stderr=err)
        line = self._wait_for_line("felix-broker listening")
        fields = dict(f.split("=", 1) for f in line.split()[2:])
        self.quic = fields["quic"]
        self.internal = fields["internal"]
        self.http = fields["http"]
        with open(os.path.join(self.data_dir, "admin-credentials.json")) as f:
            creds = json.load(f)
        self.admin_token = creds["admin_token"]
        self.ca_file = creds["ca_file"]

    def _wait_for_line(self, needle):
        deadline = time.monotonic() + START_TIMEOUT_S
        seen = 0
        while time.monotonic() < deadline:
            with open(self.stdout_path) as f:
                lines = f.read().splitlines()
            for line in lines[seen:]:
                if needle in line:
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.05)  # polling a file for the line, bounded by the deadline
        raise AssertionError(f"broker did not print {needle!r}: {self.stderr()}")

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            code = self.process.wait(timeout=30)
            self.process = None
            return code
        return 0

    def restart(self):
        code = self.stop()
        assert code == 0, f"broker exited {code}: {self.stderr()}"
        self.start()

    def cleanup(self):
        code = self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return code

    # ---- admin API -------------------------------------------------------------------------
    def admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://{self.http}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.admin_token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw else None

    def create_tenant(self, tenant):
        assert self.admin("POST", "/v1/tenants", {"tenant_id": tenant})[0] == 201
        status, _ = self.admin("POST", f"/v1/tenants/{tenant}/namespaces", {"namespace": "default"})
        assert status == 201

    def create_stream(self, name, durable=True, shards=1, routing=None, tenant="default"):
        body = {"stream": name, "durable": durable, "shards": shards}
        if routing:
            body["routing"] = routing
        status, answer = self.admin("POST", f"/v1/tenants/{tenant}/namespaces/default/streams", body)
        assert status == 201, answer

    def create_cache(self, name, durable=True, shards=1, tenant="default"):
        body = {"cache": name, "durable": durable, "shards": shards}
        status, answer = self.admin("POST", f"/v1/tenants/{tenant}/namespaces/default/caches", body)
        assert status == 201, answer

    def token(self, permissions, tenant="default", subject="interop"):
        status, body = self.admin("POST", f"/v1/tenants/{tenant}/tokens",
                                  {"subject": subject, "permissions": permissions})
        assert status == 200, body
        return body["felix_token"]

    def all_token(self, tenant="default"):
        scope = f"{tenant}/*/*"
        return self.token([
            f"stream.publish:stream:{scope}", f"stream.subscribe:stream:{scope}",
            f"stream.manage:stream:{scope}", f"cache.read:cache:{scope}",
            f"cache.write:cache:{scope}"
        ], tenant=tenant)

    def client(self, token=None, tenant="default", **kwargs):
        import felix
        return felix.Client(self.quic, tenant_id=tenant, token=token or self.all_token(tenant),
                            ca_file=self.ca_file, **kwargs)

    # ---- our CLI ---------------------------------------------------------------------------
    def cli(self, *args, stdin=None, timeout=30):
        env = dict(os.environ)
        env["FELIX_DATA_DIR"] = self.data_dir
        return subprocess.run([require_env("FELIX_CLI_BIN"), *args], env=env, input=stdin,
                              capture_output=True, text=True, timeout=timeout)


def expect_error(cls, fn, code=None, retry=None):
    """Runs fn, which must raise `cls` (with `code`/`retry` when given); returns the error."""
    try:
        fn()
    except cls as e:
        if code is not None:
            assert e.code == code, f"code {e.code!r} != {code!r} ({e})"
        if retry is not None:
            assert e.retry == retry, f"retry {e.retry!r} != {retry!r} ({e})"
        return e
    except Exception as e:  # noqa: BLE001 - reported with its class
        raise AssertionError(f"expected {cls.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")


def run(broker_factory, scenarios):
    """Runs every scenario against one broker; exit status 1 if any failed."""
    try:
        import felix  # noqa: F401
    except ImportError as e:
        print(f"interop: the reference client is not installed ({e}); run scripts/setup",
              file=sys.stderr)
        sys.exit(1)
    broker = broker_factory()
    failed = []
    try:
        for scenario in scenarios:
            started = time.monotonic()
            try:
                scenario(broker)
                print(f"PASS {scenario.__name__} ({time.monotonic() - started:.1f}s)", flush=True)
            except Exception:  # noqa: BLE001 - every failure is reported, then the next runs
                failed.append(scenario.__name__)
                print(f"FAIL {scenario.__name__}", flush=True)
                traceback.print_exc()
    finally:
        code = broker.stop()
        if code != 0:
            failed.append(f"broker exit status {code}")
            print(broker.stderr(), file=sys.stderr)
        else:
            broker.cleanup()
    if failed:
        print(f"{len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
