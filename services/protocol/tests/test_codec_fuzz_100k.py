"""Fuzzing the codec with 100,000 random and mutated frames: every one of them decodes to
a message or raises a ``DecodeError``, the same way every time, in the order PROTOCOL.md
section 4 gives.

The frames come from a seeded ``random.Random`` (hypothesis is far too slow for a hundred
thousand) in five families: random bytes; strings of msgpack tokens whose counts need not
add up; valid messages of every op under blind byte mutations (bit flips, insertions,
deletions, truncation, splicing, msgpack type bytes, huge declared lengths, edge values,
deep nesting); valid messages decoded, changed where it counts and encoded again; and maps
of random structure around ``op`` and ``v``. For the last two, section 4 predicts the error
code, and the test holds the codec to it. A failure names the frame in hex, so it can be
replayed with ``bytes.fromhex``.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field

import msgspec
from fuzz_frames import (
    CODEC,
    KNOWN_OPS,
    MUTATOR_NAMES,
    MUTATORS,
    SEED,
    VALID_FRAMES,
    VALID_MESSAGES,
    expected_codes,
    mutated,
    random_bytes,
    structured,
    token_soup,
    tree_mutated,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import fastworker_protocol as fp

FRAMES = 100_000
SMALL_LIMIT = 512  # a second codec with a tiny limit checks that size is judged first
MAX_REPORTED = 20

# --- running them -------------------------------------------------------------------------------

ADDRESS = re.compile(r" at 0x[0-9a-f]+")
Outcome = tuple[str, str]  # ("decoded", re-encoded hex) or (error code, exception text)


def outcome_of(codec: fp.Codec, frame: bytes) -> Outcome:
    """Decode ``frame``; anything but a message or a ``DecodeError`` propagates."""
    try:
        message = codec.decode(frame)
    except fp.DecodeError as exc:  # (an Ext's repr names its address: not part of the outcome)
        return str(exc.code), ADDRESS.sub("", f"{type(exc).__name__}: {exc}")
    assert isinstance(message, fp.Message), repr(message)
    return "decoded", msgspec.msgpack.encode(message).hex()


@dataclass
class Fuzz:
    """Runs frames through the codec, tallies outcomes and keeps the first problems."""

    frames: int = 0
    tally: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def problem(self, family: str, frame: bytes, what: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_REPORTED:
            self.problems.append(f"{family} frame {frame.hex()}: {what}")

    def check(self, family: str, frame: bytes, oracle: set[str | None] | None = None) -> None:
        self.frames += 1
        self.families[family] += 1
        try:
            first = outcome_of(CODEC, frame)
        except Exception as exc:  # the bug this test is for: record it, keep going
            self.tally["crash"] += 1
            self.problem(family, frame, f"decode raised {type(exc).__name__}: {exc!r}")
            return
        self.tally[first[0]] += 1
        again = outcome_of(fp.Codec(), bytes(bytearray(frame)))  # a fresh codec, a copy
        if again != first:
            self.problem(family, frame, f"not deterministic: {first} then {again}")
        if first[0] == "decoded":
            try:
                echoed = outcome_of(CODEC, CODEC.encode(CODEC.decode(frame)))
            except Exception as exc:
                self.problem(family, frame, f"a decoded message does not re-encode: {exc!r}")
            else:
                if echoed != first:
                    self.problem(family, frame, f"round trip changed it: {first} -> {echoed}")
        if self.frames % 10 == 0:  # the size limit is judged before anything else
            want = "oversize" if len(frame) > SMALL_LIMIT else first[0]
            small = outcome_of(SMALL, frame)
            if small[0] != want:
                self.problem(family, frame, f"limit {SMALL_LIMIT}: {small} instead of {want}")
        if oracle is not None and (None if first[0] == "decoded" else first[0]) not in oracle:
            self.problem(family, frame, f"got {first}, PROTOCOL.md section 4 says {oracle}")


SMALL = fp.Codec(max_message_size=SMALL_LIMIT)


def test_a_hundred_thousand_random_and_mutated_frames_decode_or_raise_decode_errors() -> None:
    rng = random.Random(SEED)
    fuzz = Fuzz()
    started = time.perf_counter()
    for frame in VALID_FRAMES:  # the seeds themselves decode
        fuzz.check("valid", frame, {None})
    while fuzz.frames < FRAMES:
        roll = rng.random()
        if roll < 0.25:
            fuzz.check("random", random_bytes(rng))
        elif roll < 0.35:
            fuzz.check("tokens", token_soup(rng))
        elif roll < 0.6:
            fuzz.check("mutated", mutated(rng))
        elif roll < 0.8:
            frame, obj = tree_mutated(rng)
            fuzz.check("tree", frame, expected_codes(obj))
        else:
            frame, obj = structured(rng)
            fuzz.check("structured", frame, expected_codes(obj))
    elapsed = time.perf_counter() - started
    print(f"\ncodec fuzz: {fuzz.frames} frames in {elapsed:.1f} s, seed {SEED}")
    print(f"  by family: {dict(sorted(fuzz.families.items()))}")
    print(f"  outcomes:  {dict(fuzz.tally.most_common())}")
    assert fuzz.frames >= FRAMES
    assert fuzz.problem_count == 0, "\n".join(
        [f"{fuzz.problem_count} problems, the first ones:", *fuzz.problems]
    )
    # every family reached past the first decoding step, and every error code of
    # section 4 showed up at least once
    assert {"decoded", "malformed", "invalid_message", "unknown_op"} <= set(fuzz.tally)
    assert "unsupported_version" in fuzz.tally


def test_the_seed_frames_cover_every_op_and_decode_to_themselves() -> None:
    assert {fp.message_op(m) for m in VALID_MESSAGES} == KNOWN_OPS
    for frame, message in zip(VALID_FRAMES, VALID_MESSAGES, strict=True):
        assert CODEC.encode(CODEC.decode(frame)) == frame, message  # NaN != NaN: compare bytes


@settings(max_examples=300, deadline=None)
@given(
    seed_frame=st.sampled_from(VALID_FRAMES),
    steps=st.lists(
        st.tuples(st.sampled_from(MUTATOR_NAMES), st.integers(0, 2**32 - 1)), min_size=1, max_size=5
    ),
)
def test_hypothesis_chosen_mutations_of_valid_frames_decode_or_raise_decode_errors(
    seed_frame: bytes, steps: list[tuple[str, int]]
) -> None:
    frame = bytearray(seed_frame)
    for name, seed in steps:
        MUTATORS[name](frame, random.Random(seed))
    first = outcome_of(CODEC, bytes(frame))
    assert outcome_of(fp.Codec(), bytes(frame)) == first
