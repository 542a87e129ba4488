"""The accuracy service's own parts: its one-line errors (from a real lm_eval
0.4.13 failure) and the local-copy task it writes for --dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.services.runs.accuracy import AccuracyError, explain_failure, local_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lm-eval-0.4.13"


def test_no_hub_says_how_to_point_at_a_local_copy():
    lines = (FIXTURES / "fail_no_hub.log").read_text().splitlines()
    message = explain_failure(lines, "gsm8k", 1, None)
    assert message.startswith("lm_eval could not fetch the gsm8k dataset from the Hugging Face hub")
    assert "Couldn't reach 'openai/gsm8k' on the Hub" in message
    assert "give --dataset PATH with a local copy" in message and "\n" not in message


def test_other_failures_give_lm_evals_own_line():
    few = ["Traceback (most recent call last):", "ValueError: Sample larger than population or is negative"]
    assert "fewer training examples than 5 few-shot examples" in explain_failure(few, "gsm8k", 1, 5)
    own = ["INFO x", "Traceback (most recent call last):", "  File 'x'", "KeyError: 'question'"]
    assert explain_failure(own, "gsm8k", 1, None) == "lm_eval failed: KeyError: 'question'"


def _tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks" / "gsm8k"
    folder.mkdir(parents=True)
    (folder / "gsm8k.yaml").write_text(
        "task: gsm8k\ndataset_path: openai/gsm8k\ntraining_split: train\nfewshot_split: train\ntest_split: test\n"
    )
    return tmp_path / "tasks"


def test_local_copy_becomes_a_task_including_lm_evals_own(tmp_path):
    data = tmp_path / "ds"
    data.mkdir()
    (data / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (data / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    name = local_task(data, "gsm8k", _tasks(tmp_path), tmp_path / "out")
    text = (tmp_path / "out" / f"{name}.yaml").read_text()
    assert name == "gsm8k_local"
    assert f'include: "{tmp_path / "tasks" / "gsm8k" / "gsm8k.yaml"}"' in text
    assert "dataset_path: json" in text
    assert f'"test": "{data / "test.jsonl"}"' in text and f'"train": "{data / "train.jsonl"}"' in text


def test_bad_dataset_paths_are_one_line(tmp_path):
    tasks = _tasks(tmp_path)
    with pytest.raises(AccuracyError, match="no such file or folder"):
        local_task(tmp_path / "missing", "gsm8k", tasks, tmp_path / "o")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AccuracyError, match="no test.jsonl in it"):
        local_task(tmp_path / "empty", "gsm8k", tasks, tmp_path / "o")
    (tmp_path / "x.jsonl").write_text("{}\n")
    with pytest.raises(AccuracyError, match="--task mmlu: lm_eval has no task of that name"):
        local_task(tmp_path / "x.jsonl", "mmlu", tasks, tmp_path / "o")
