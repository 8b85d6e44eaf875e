"""The output file of a long run (on a Context or a Cluster): one JSON line per finished prompt,
appended as results come, and read back when a killed run resumes.

A run killed while writing can leave a torn last line; resuming cuts it off (that prompt
runs again). Every line carries a digest of its prompt and settings, one of its settings alone
and the SHA-256 of the model file that answered it: a resume finds each prompt's line by the
prompt itself (and its id, where the caller gave ids), wherever it stands in the input, and
runs a changed prompt again; resuming with other settings or another model is refused, before
anything runs, instead of mixing two runs in one file. A prompt whose line
holds an error is run again when resuming with ``retry_errors=True``; its new line goes
after the old one, and the last line of a prompt is its result. The file is locked while a
run writes to it."""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, Hashable, Iterable, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from ..errors import InvalidArgumentError
from .jobs import Job, check_ids
from ..models.model_hash import ModelIdentity
from .recording import Recording

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one run per file is then the user's care
    fcntl = None  # type: ignore[assignment]


class RecordsItself(Protocol):
    """What a context's numbers repeat with (engine.reproducibility.Determinism), as a results line records it."""

    def as_record(self) -> dict: ...


def holds_error(record: Mapping[str, object]) -> bool:
    return record.get("error") is not None


class ResultsFile:
    """An open JSON Lines file of results written by ``model``. ``done`` maps the position of every prompt whose
    result is in the file already (when resuming) to its record (match_records())."""

    def __init__(self, path: Union[str, os.PathLike], resume: bool, ids: Optional[List[Hashable]],
                 digests: Sequence[str], settings: Sequence[str], model: ModelIdentity) -> None:
        self.path = os.fspath(path)
        self.model = model
        exists = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if exists and not resume:
            raise InvalidArgumentError(f"{self.path} already holds results; pass resume=True to continue that run, "
                                       "or give another file")
        try:
            self._file = open(self.path, "r+b" if exists else "wb")
        except OSError as exc:
            raise InvalidArgumentError(f"cannot open the output file {self.path}: {exc.strerror}") from None
        try:
            self._lock()
            self.done: Dict[int, dict] = (match_records(self.path, self._read(), ids, digests, settings)
                                          if exists else {})
        except BaseException:
            self._file.close()
            raise

    def _lock(self) -> None:
        if fcntl is None:
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InvalidArgumentError(f"{self.path} is being written by another run") from None

    def _read(self) -> List[Tuple[int, dict]]:
        """Every complete line's record, with its line number; a torn last line is cut off (that prompt runs
        again)."""
        data = self._file.read()
        complete = data[: data.rfind(b"\n") + 1]
        records = []
        for n, line in enumerate(complete.splitlines(), 1):
            if line.strip():
                record = self._parse(line, n)
                self._check_model(record, n)
                records.append((n, record))
        if len(complete) < len(data):
            self._file.truncate(len(complete))
        self._file.seek(len(complete))
        return records

    def _check_model(self, record: dict, n: int) -> None:
        recorded = record.get("model_sha256")
        if recorded is None:
            raise InvalidArgumentError(
                f"{self.path} line {n} does not say which model wrote it (it was written before newrllama recorded "
                "the model in results files), so resuming could mix two models' answers: use another file, or, if "
                f"it was written with {self.model.path}, add \"model_sha256\": \"{self.model.sha256}\" to each of "
                "its lines")
        if recorded != self.model.sha256:
            raise InvalidArgumentError(
                f"{self.path} line {n} was written by a model file of SHA-256 {recorded}, and this run's model "
                f"{self.model.path} has SHA-256 {self.model.sha256}: resuming would mix two models' answers in one "
                "file; resume with the model that wrote it, or use another file")

    def _parse(self, line: bytes, n: int) -> dict:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("index"), int):
            raise InvalidArgumentError(f"{self.path} line {n} is not a result of newrllama; use another file")
        return record

    def append(self, records: Iterable[dict]) -> None:
        """Writes the records and makes them durable before returning."""
        data = b"".join(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in records)
        if not data:
            return
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()  # also releases the lock


def match_records(path: str, records: List[Tuple[int, dict]], ids: Optional[List[Hashable]], digests: Sequence[str],
                  settings: Sequence[str]) -> Dict[int, dict]:
    """Which position each line of the file answers, by the prompt itself: with ids, the line of the same id whose
    prompt is the same (a changed text or prompt runs again); without, a line of the same prompt and settings,
    wherever it stood (a reordered corpus resumes; identical prompts share their lines, one each). A line made with
    other settings (instruction, labels, sampling parameters ...) is refused, so that one file never mixes two runs;
    a line of a prompt no longer in the run is kept in the file and left unused. Of several lines of one prompt, a
    result comes before an error, and the last result of an id wins. Lines written before the settings were
    recorded on their own resume only where their position (or id) and prompt both match, as they did then."""
    known_settings = set(settings)
    key_of = {key: i for i, key in enumerate(ids)} if ids is not None else None
    by_digest: Dict[str, List[int]] = {}
    for i, d in enumerate(digests):
        by_digest.setdefault(d, []).append(i)
    done: Dict[int, dict] = {}
    unkeyed: Dict[str, List[dict]] = {}
    for n, record in records:
        recorded_settings = record.get("settings_sha256")
        if recorded_settings is None:
            _match_by_position(path, n, record, key_of, digests, done)
            continue
        if recorded_settings not in known_settings:
            raise InvalidArgumentError(f"{path} line {n} was run with other settings than this run's (instruction, "
                                       "labels, definitions, debias or sampling parameters): use another file to run "
                                       "these, or resume with the settings that wrote it")
        if key_of is None:
            unkeyed.setdefault(record.get("input_sha256"), []).append(record)
            continue
        i = key_of.get(record.get("id"))
        if i is None or record.get("input_sha256") != digests[i]:
            continue  # a prompt no longer in the run, or changed since: it runs again
        if i in done and not holds_error(done[i]) and not holds_error(record):
            raise InvalidArgumentError(f"{path} holds {_describe(ids[i])} twice (line {n})")
        if i not in done or holds_error(done[i]):
            done[i] = record
    for d, lines in unkeyed.items():
        ordered = [r for r in lines if not holds_error(r)] + [r for r in lines if holds_error(r)]
        for i, record in zip(by_digest.get(d, []), ordered):
            done.setdefault(i, record)
    return done


def _match_by_position(path: str, n: int, record: dict, key_of: Optional[Dict[Hashable, int]],
                       digests: Sequence[str], done: Dict[int, dict]) -> None:
    """A line of a file written before lines recorded their settings: its id, else its index, with the same prompt."""
    key = record["id"] if "id" in record else record["index"]
    i = key_of.get(key) if key_of is not None else (key if 0 <= key < len(digests) else None)
    if i is None:
        raise InvalidArgumentError(f"{path} line {n} holds a result for {_describe(key)}, which is not among the "
                                   "prompts of this run; use another file or resume=False")
    if record.get("input_sha256") != digests[i]:
        raise InvalidArgumentError(f"{path} line {n}: {_describe(key)} was run with another prompt or other settings; "
                                   "use another file to run these")
    if i in done and not holds_error(done[i]):  # only a failed prompt is run again
        raise InvalidArgumentError(f"{path} holds {_describe(key)} twice (line {n})")
    done[i] = record


def _describe(key: Hashable) -> str:
    return f"prompt {key}" if isinstance(key, int) else f"the prompt with id {key!r}"


# Runs the prompts at the given indices of a job and returns their results in that order; calls
# record(indices, results) with results to be written as they come (results not recorded, such as a
# chunk that lost its worker, are returned but not written, so that a resume runs them again).
class RecordedRun:
    """A job run against its recording, as the runner sees it: ``todo``, the positions still to run (those not read
    back from the output file, but for failed ones with ``retry_errors``); ``record()`` appends results to the file
    as they come, each line with what its numbers repeat with (``determinism``, when one context ran them);
    ``results()`` gives every result in input order once the runner has them for ``todo``. Use it in a ``with``
    block: the file is closed on leaving. ``model`` is called only when there is a file."""

    def __init__(self, job: Job, recording: Recording, model: Callable[[], ModelIdentity],
                 determinism: Optional[RecordsItself] = None) -> None:
        self._job = job
        self._ids = check_ids(recording.ids, len(job))
        self._determinism = determinism
        self._out = (ResultsFile(recording.output, recording.resume, self._ids, job.digests, job.settings_digests,
                                 model()) if recording.writes else None)
        self._results: List[Any] = [None] * len(job)
        if self._out is not None:
            try:
                for i, line in self._out.done.items():
                    if not (recording.retry_errors and holds_error(line)):
                        self._results[i] = job.from_record(line)
            except BaseException:
                self._out.close()
                raise
        self.todo: List[int] = [i for i, r in enumerate(self._results) if r is None]
        self.n_resumed = len(job) - len(self.todo)
        self.t_write = 0.0  # seconds spent writing the file

    def __enter__(self) -> "RecordedRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()

    def record(self, indices: Sequence[int], done: Sequence[Any]) -> None:
        """Appends the results of these positions to the file (nothing without one)."""
        if self._out is not None:
            t0 = time.perf_counter()
            self._out.append(_record(i, self._ids, self._job, r, self._out.model, self._determinism)
                             for i, r in zip(indices, done))
            self.t_write += time.perf_counter() - t0

    def results(self, of_todo: Sequence[Any]) -> List[Any]:
        """Every result in input order: those read back, and of_todo for the positions in todo."""
        for i, r in zip(self.todo, of_todo):
            self._results[i] = r
        return self._results


def _record(index: int, ids: Optional[Sequence[Hashable]], job: Job, result: Any, model: ModelIdentity,
            determinism: Optional[RecordsItself]) -> dict:
    record: dict = {"index": index}
    if ids is not None:
        record["id"] = ids[index]
    record.update(job.record(result))
    record["input_sha256"] = job.digests[index]
    record["settings_sha256"] = job.settings_digests[index]
    record["model_sha256"] = model.sha256
    if determinism is not None:
        record["determinism"] = determinism.as_record()
    return record
