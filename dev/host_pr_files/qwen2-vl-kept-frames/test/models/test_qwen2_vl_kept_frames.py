"""Qwen2_VL decodes only the video frames it keeps, and its processor gets the same tensors as before.

"Before" is computed here as the model did it: `process_vision_info` on the messages, then
`unique(linspace(0, n - 1, max_num_frames))` of the decoded frames.
"""

from fractions import Fraction
from types import SimpleNamespace

import av
import decord
import numpy as np
import pytest
import torch

from lmms_eval.models.model_utils import qwen_kept_frames
from lmms_eval.models.simple.qwen2_vl import Qwen2_VL

vision_process = pytest.importorskip("qwen_vl_utils.vision_process")

# name: (seconds, frame rate, width, height, B-frames, keyframe interval)
VIDEOS = {
    "2s_30fps_320x240": (2, 30, 320, 240, 0, 250),  # 4 frames decoded: fewer than the budget, all kept
    "20s_ntsc_176x144_bframes": (20, Fraction(30000, 1001), 176, 144, 2, 60),  # 38 decoded, 32 kept
    "60s_10fps_64x48": (60, 10, 64, 48, 0, 250),  # 120 decoded, frames far from keyframes
    "12s_7fps_portrait_90x160": (12, 7, 90, 160, 3, 30),  # a size that is no multiple of the patch
}


def write_video(path, seconds, rate, width, height, bframes, gop):
    """A textured clip whose every frame differs (a wrong frame cannot look like the right one)."""
    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, (height * 2, width * 2, 3), dtype=np.uint8)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}", "crf": "18", "preset": "ultrafast" if bframes == 0 else "medium"}
        for index in range(int(round(seconds * rate))):
            shift = (3 * index) % height, (5 * index) % width
            image = texture[shift[0] : shift[0] + height, shift[1] : shift[1] + width].copy()
            image[: 1 + index % height, :4] = 255  # a bar that grows frame by frame
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return str(path)


def model(decode_kept_frames, max_num_frames=32):
    qwen = Qwen2_VL.__new__(Qwen2_VL)  # no checkpoint: the inputs depend on these settings only
    qwen.max_num_frames, qwen.decode_kept_frames = max_num_frames, decode_kept_frames
    return qwen


def messages(*visuals):
    content = [{"type": "video", "video": v, "max_pixels": 602112, "min_pixels": 3136} if isinstance(v, str) else {"type": "image", "image": v} for v in visuals]
    return [[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": content + [{"type": "text", "text": "Describe the video."}]}]]


def before_this_change(conversations, max_num_frames):
    images, videos = vision_process.process_vision_info(conversations)
    n = videos[0].shape[0]
    videos[0] = videos[0][np.unique(np.linspace(0, n - 1, max_num_frames, dtype=int, endpoint=True))]
    return images, videos


@pytest.fixture
def decoded(monkeypatch):
    """How many frames decord decodes, call by call."""
    counts = []
    get_batch = decord.VideoReader.get_batch

    def counting(self, indices):
        counts.append(len(indices))
        return get_batch(self, indices)

    monkeypatch.setattr(decord.VideoReader, "get_batch", counting)
    return counts


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    return {name: write_video(folder / f"{name}.mp4", *spec) for name, spec in VIDEOS.items()}


@pytest.mark.parametrize("name, max_num_frames", [(name, 32) for name in VIDEOS] + [("20s_ntsc_176x144_bframes", 8), ("60s_10fps_64x48", 8)])
def test_the_same_tensor_from_the_kept_frames_only(videos, name, max_num_frames, decoded):
    if vision_process.get_video_reader_backend() != "decord":
        pytest.skip("qwen_vl_utils reads with another backend here: the model takes its usual path")
    conversations = messages(videos[name])
    _, expected = before_this_change(conversations, max_num_frames)
    decoded_before = decoded[-1]
    images, got = model(True, max_num_frames)._vision_inputs(conversations)
    assert images is None and len(got) == 1
    assert got[0].dtype == expected[0].dtype and got[0].shape == expected[0].shape
    assert torch.equal(got[0], expected[0])
    assert decoded[-1] == len(got[0]) == len(qwen_kept_frames.kept_positions(decoded_before, max_num_frames))
    assert decoded[-1] < decoded_before or decoded_before <= max_num_frames


def test_switched_off_and_unsupported_cases_take_the_usual_path(videos, decoded, monkeypatch):
    clip = videos["20s_ntsc_176x144_bframes"]
    _, expected = before_this_change(messages(clip), 32)
    every = decoded[-1]
    for qwen, conversations in ((model(False), messages(clip)), (model(True), messages(clip, clip))):
        decoded.clear()
        _, got = qwen._vision_inputs(conversations)
        assert torch.equal(got[0], expected[0]) and decoded == [every] * len(got)  # every frame decoded, as before
    monkeypatch.setattr(vision_process, "get_video_reader_backend", lambda: "torchvision")
    assert qwen_kept_frames.video_inputs_of_kept_frames(messages(clip), 32) is None


def test_images_beside_the_video_are_unchanged(videos, decoded):
    if vision_process.get_video_reader_backend() != "decord":
        pytest.skip("qwen_vl_utils reads with another backend here")
    from PIL import Image

    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (100, 140, 3), dtype=np.uint8))
    conversations = messages(image, videos["60s_10fps_64x48"])
    expected_images, expected_videos = before_this_change(conversations, 32)
    images, got = model(True)._vision_inputs(conversations)
    assert decoded[-1] == 32 and torch.equal(got[0], expected_videos[0])
    assert [np.asarray(i).tolist() for i in images] == [np.asarray(i).tolist() for i in expected_images]


def test_the_frame_size_follows_the_decoded_count_not_the_kept_one(videos, decoded, monkeypatch):
    """fetch_video fits each frame to its token budget divided among the frames it decoded (768 for a
    long video); a small MODEL_SEQ_LEN makes that budget bind on a short clip: 38 decoded, 32 kept."""
    if vision_process.get_video_reader_backend() != "decord":
        pytest.skip("qwen_vl_utils reads with another backend here")
    monkeypatch.setattr(vision_process, "MODEL_SEQ_LEN", 400)
    conversations = messages(videos["20s_ntsc_176x144_bframes"])
    _, expected = before_this_change(conversations, 32)
    assert decoded[-1] > 32 and expected[0].shape[2] * expected[0].shape[3] < 176 * 144  # the budget shrank the frames
    _, got = model(True)._vision_inputs(conversations)
    assert decoded[-1] == 32 and got[0].shape == expected[0].shape and torch.equal(got[0], expected[0])


def test_a_qwen_vl_utils_release_not_checked_takes_the_usual_path(videos, decoded, monkeypatch):
    """A later qwen-vl-utils may sample or resize otherwise: until checked, the model decodes as before."""
    clip = videos["20s_ntsc_176x144_bframes"]
    _, expected = before_this_change(messages(clip), 32)
    every = decoded[-1]
    monkeypatch.setattr(qwen_kept_frames, "_qwen_vl_utils_version", lambda: "0.0.15")
    decoded.clear()
    _, got = model(True)._vision_inputs(messages(clip))
    assert torch.equal(got[0], expected[0]) and decoded == [every]


def test_a_renamed_qwen_vl_utils_internal_takes_the_usual_path(videos, decoded, monkeypatch):
    """The kept-frames path reads qwen_vl_utils' constants; a release that renames one (here
    VIDEO_MAX_TOKEN_NUM) sends the model to its usual path instead of raising."""
    import qwen_vl_utils

    clip = videos["20s_ntsc_176x144_bframes"]
    _, expected = before_this_change(messages(clip), 32)
    every = decoded[-1]
    renamed = {name: value for name, value in vars(vision_process).items() if name != "VIDEO_MAX_TOKEN_NUM"}
    monkeypatch.setattr(qwen_vl_utils, "vision_process", SimpleNamespace(**renamed, VIDEO_MAX_TOKENS=vision_process.VIDEO_MAX_TOKEN_NUM))
    decoded.clear()
    _, got = model(True)._vision_inputs(messages(clip))
    assert torch.equal(got[0], expected[0]) and decoded[-1] == every  # every frame decoded by the usual path
