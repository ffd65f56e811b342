"""The launch recorder's ghost mode on its own (``sandbox/child/launches.py``): what a skipped kernel
leaves zeroed in each replay, what is put back after it, and faults of its own reported, never
raised into the candidate's code. The judge's use of it is in tests/test_loopholes.py."""

from __future__ import annotations

import torch

from kernelevo.sandbox.child.launches import LaunchRecorder


def test_the_blank_replay_zeroes_every_tensor_and_puts_back_the_storages_from_before_the_call() -> None:
    flat = torch.arange(1.0, 9.0)
    weight, bias = flat[:4].detach(), flat[4:].detach()  # two views of one storage, neither with a _base
    recorder = LaunchRecorder()
    recorder.start_ghost("blank")
    fresh = torch.ones(3)
    recorder.blank([weight, bias, fresh])
    assert not weight.any() and not bias.any() and not fresh.any()
    recorder.stop_ghost()
    assert torch.equal(flat, torch.arange(1.0, 9.0)) and recorder.fault is None and not recorder.ghost


def test_the_keep_replay_zeroes_only_what_is_still_uninitialised() -> None:
    recorder = LaunchRecorder()
    kept = torch.arange(4.0)
    recorder.start_ghost("keep")
    poisoned, computed = torch.full((3,), float("nan")), torch.ones(3)
    recorder.blank([kept, poisoned, computed])
    recorder.stop_ghost()
    assert torch.equal(kept, torch.arange(4.0)) and not poisoned.any() and torch.equal(computed, torch.ones(3))


def test_tensors_the_replay_cannot_zero_are_its_fault_not_the_candidates() -> None:
    recorder = LaunchRecorder()
    sparse = torch.zeros(2).to_sparse()  # no storage: skipped, and the list of tensors alive still made
    with torch.inference_mode():
        inference = torch.ones(2)
    recorder.start_ghost("blank")
    recorder.blank([sparse, inference])
    assert recorder.fault is None and not inference.any()

    class Unzeroable(torch.Tensor):
        def zero_(self):  # noqa: ANN202 - a tensor that refuses the replay
            raise RuntimeError("no")

    odd = torch.ones(2).as_subclass(Unzeroable)
    recorder.blank([odd])  # does not raise into the candidate's forward
    recorder.stop_ghost()
    assert recorder.fault and "zeroing a kernel's tensor" in recorder.fault
