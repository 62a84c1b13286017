"""The reference tables (docs/reference/options.md, statuses.md) are generated from the C headers
and the bindings' own tables: a header, binding or page that drifts fails here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "scripts" / "gen-reference.py"


def test_reference_tables_are_current():
    proc = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_every_option_and_status_has_a_row_in_every_binding():
    """No row of the generated tables lacks its Python or Go name: an option or status added to
    a header without its binding names fails (the CLI and URL columns may say '-')."""
    for page, columns in (("options.md", (1, 2)), ("statuses.md", (3, 4, 5))):
        rows = [ln.split(" | ") for ln in (ROOT / "docs" / "reference" / page).read_text().splitlines()
                if ln.startswith("| `BG_")]
        assert len(rows) > 20, page
        for row in rows:
            for col in columns:
                assert row[col].strip() not in ("-", ""), (page, row[0], col)


def test_the_check_fails_on_a_stale_table(tmp_path):
    """Negative control: a copy of the generator pointed at a changed table reports it stale."""
    text = GEN.read_text().replace('OUT = ROOT / "docs" / "reference"', 'OUT = Path(%r)' % str(tmp_path))
    text = text.replace('ROOT = Path(__file__).resolve().parent.parent', 'ROOT = Path(%r)' % str(ROOT))
    gen = tmp_path / "gen.py"
    gen.write_text(text)
    for name in ("options.md", "statuses.md", "c-api.md"):
        (tmp_path / name).write_text((ROOT / "docs" / "reference" / name).read_text())
    assert subprocess.run([sys.executable, str(gen), "--check"], capture_output=True).returncode == 0
    page = tmp_path / "options.md"
    page.write_text(page.read_text().replace("`pool_size`", "`pool_sise`", 1))
    proc = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True)
    assert proc.returncode == 1 and "options.md out of date" in proc.stderr, proc.stderr
