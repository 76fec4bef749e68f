"""The scheduled retraining job: `mmdedup retrain` for cron or a systemd timer.

One JSON line per run on stdout (when it ran, how long, what changed: model versions,
words moved, items re-signed, pairs whose tier changed), so the scheduler's log is a
record a script can read. Exit status: 0 the run finished (changed or not), 3 another
retrain held the lock for longer than --wait (the next scheduled run will catch up),
1 it failed.

    python scripts/retrain_job.py [--home H] [--db URL] [--wait SECONDS]

cron, nightly at 03:15:
    15 3 * * *  cd /srv/mmdedup && .venv/bin/python scripts/retrain_job.py --home /srv/mmdedup/store >> /var/log/mmdedup-retrain.jsonl 2>&1
(a systemd timer example is in the README)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

from mmdedup import Platform
from mmdedup.api import LockBusy, StoreError, store_problem


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=None, help="store folder (default $MMDEDUP_HOME or .mmdedup)")
    ap.add_argument("--db", default=None, help="database URL (default SQLite in the home)")
    ap.add_argument("--wait", type=float, default=600.0,
                    help="seconds to wait for a retrain already running (default 600)")
    args = ap.parse_args(argv)
    started = datetime.now(timezone.utc)
    record: dict = {"started": started.isoformat(timespec="seconds")}
    clock = time.perf_counter()
    status = 0
    url = ""
    try:
        with Platform.open(args.home, args.db) as platform:
            url = platform.url
            record |= {"status": "done", **platform.retrain(wait_seconds=args.wait).as_dict()}
    except LockBusy as exc:
        record |= {"status": "busy", "error": str(exc)}
        status = 3
    except Exception as exc:  # the scheduler's log must say why, whatever it was
        # A store that cannot be opened or went away mid-run: what is wrong and what to do.
        problem = exc if isinstance(exc, StoreError) else store_problem(exc, url) if url else None
        record |= {"status": "failed", "error": str(problem) if problem else f"{type(exc).__name__}: {exc}"}
        status = 1
    record["seconds"] = round(time.perf_counter() - clock, 2)
    print(json.dumps(record, ensure_ascii=False), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
