"""What `gangsched run` loads before its first bind (issue 30): kopf is not part of it, it
comes once the operator's caches have synced (gangsched.edge.app)."""

from __future__ import annotations

import subprocess
import sys


def test_the_operator_starts_without_kopf_loaded() -> None:
    # What `gangsched run` imports before it starts the operator (gangsched.cli).
    probe = (
        "import sys\n"
        "from gangsched.edge import slim_client\n"
        "slim_client.install()\n"
        "import gangsched.config, gangsched.edge.app, gangsched.edge.early_lists\n"
        "print(sorted(m for m in sys.modules if m == 'kopf' or m.startswith('kopf.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
