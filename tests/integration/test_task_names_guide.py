"""docs/guides/task-names.md works as written: its three files (two apps' ``tasks.py``, each
with a ``notify``, and ``names.py``) in a fresh directory, then ``python names.py``, which
must print exactly what the guide shows (the names registered, a Task object run, a unique
bare name resolved, a pinned name kept, an ambiguous bare name refused)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "task-names.md"


def test_the_task_names_guide_prints_what_it_shows(tmp_path: Path) -> None:
    text = GUIDE.read_text(encoding="utf-8")
    files = dict(re.findall(r'```python title="([^"]+)"\n(.*?)```', text, flags=re.DOTALL))
    assert sorted(files) == ["billing/tasks.py", "names.py", "shop/tasks.py"]
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source, encoding="utf-8")
    [shown] = re.findall(r"`python names.py` prints:\n\n```text\n(.*?)```", text, flags=re.DOTALL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}

    done = subprocess.run(
        [sys.executable, "names.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == shown
