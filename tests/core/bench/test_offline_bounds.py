"""An offline preset file past a documented bound (console/core/bounds.py) is one line
naming the file, the table and the key (issue W2 item 10)."""

from __future__ import annotations

import pytest

from console.core.bench.offline import load_offline_presets
from console.core.errors import ProfileError

HUGE = "99999999999999999999999"


def test_an_offline_preset_file_past_a_bound_names_the_table_and_key(tmp_path):
    presets = tmp_path / "offline.toml"
    presets.write_text(f'[throughput.big]\nmodel = "m"\nnum_prompts = {HUGE}\n')
    with pytest.raises(ProfileError) as caught:
        load_offline_presets(presets)
    assert str(caught.value) == f"{presets}:3: [throughput.big] key 'num_prompts': must be at most 1000000, got {HUGE}"
