"""Face pipeline on real photographs that ship in installed packages (no dataset needed)."""
import io

import numpy as np
import pytest
from PIL import Image

from privface import demo_data
from privface.errors import ImageError, ModelError, NoFaceError
from privface.faces.image import load_rgb
from privface.faces.registry import make_backend


@pytest.fixture(scope="module")
def hopper():
    return demo_data.enrolled_photo()


def test_load_rgb_accepts_path_bytes_pil_and_arrays(hopper):
    a = load_rgb(hopper)
    assert a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3
    assert np.array_equal(load_rgb(hopper.read_bytes()), a)
    assert np.array_equal(load_rgb(Image.open(hopper)), a)
    assert np.array_equal(load_rgb(a), a)
    grey = load_rgb(a[:, :, 0])
    assert grey.shape == a.shape and np.array_equal(grey[:, :, 0], grey[:, :, 2])
    assert np.array_equal(load_rgb(a / 255.0), a)
    rgba = np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])
    assert np.array_equal(load_rgb(rgba), a)


@pytest.mark.parametrize("bad, message", [
    ("/nonexistent/face.jpg", "no such image file"),
    (b"definitely not an image", "not an image"),
    (np.zeros((4, 4, 3), np.uint8), "too small"),
    (np.zeros((20, 20, 2), np.uint8), "must be H×W"),
    (np.full((20, 20), 2.0), "lie in \\[0, 1\\]"),
    (np.full((20, 20), 300, np.int32), "lie in \\[0, 255\\]"),
    (12345, "cannot read an image"),
])
def test_load_rgb_rejects_bad_input(bad, message):
    with pytest.raises(ImageError, match=message):
        load_rgb(bad)


def test_exif_orientation_is_applied_to_encoded_images_only(hopper):
    """A phone JPEG rotated by EXIF (orientation 6: turn 90° clockwise to view) loads upright, as in a browser."""
    upright = Image.open(hopper).convert("RGB")
    stored = upright.transpose(Image.Transpose.ROTATE_90)  # what the camera wrote: the view turned 90° anticlockwise
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    stored.save(buf, "PNG", exif=exif)
    loaded = load_rgb(buf.getvalue())
    assert loaded.shape == np.asarray(upright).shape
    assert np.array_equal(loaded, np.asarray(upright))
    buf.seek(0)
    assert load_rgb(Image.open(buf)).shape == np.asarray(stored).shape  # a PIL image is taken as it is


def test_truncated_jpeg_is_a_clear_error(hopper):
    data = hopper.read_bytes()
    with pytest.raises(ImageError, match="corrupt|truncated|not an image"):
        load_rgb(data[: len(data) // 3])


def test_text_file_is_not_an_image(tmp_path):
    p = tmp_path / "notes.jpg"
    p.write_text("hello")
    with pytest.raises(ImageError, match="not an image"):
        load_rgb(p)


def test_dlib_backend_finds_and_embeds_a_real_face(backend, hopper):
    faces = backend.faces(hopper)
    assert len(faces) == 1
    f = faces[0]
    left, top, right, bottom = f.box
    h, w = load_rgb(hopper).shape[:2]
    assert 0 <= left < right <= w and 0 <= top < bottom <= h and (right - left) > 50
    assert f.landmarks.shape == (5, 2)
    assert all(left - 10 <= x <= right + 10 and top - 10 <= y <= bottom + 10 for x, y in f.landmarks)
    assert f.chip.shape == (150, 150, 3)
    assert f.embedding.shape == (128,) and f.embedding.dtype == np.float32
    assert 0.5 < np.linalg.norm(f.embedding) < 1.5


def test_same_person_close_other_person_far(backend, hopper):
    e = backend.embed(hopper)
    for name, img in demo_data.altered_copies(hopper).items():
        assert backend.distance(e, backend.embed(img)) < backend.threshold, name
    for name, path in demo_data.impostor_photos().items():
        assert backend.distance(e, backend.embed(path)) > backend.threshold, name


def test_grey_input_gives_nearly_the_same_embedding(backend, hopper):
    rgb = load_rgb(hopper)
    grey = np.asarray(Image.fromarray(rgb).convert("L"))
    assert backend.distance(backend.embed(rgb), backend.embed(grey)) < 0.25


def test_small_image_is_upscaled_and_found(backend, hopper):
    small = Image.open(hopper).convert("L").resize((92, 112))
    buf = io.BytesIO()
    small.save(buf, "PPM")
    assert len(backend.faces(buf.getvalue())) == 1


def test_no_face_is_a_typed_error(backend):
    noise = np.random.default_rng(0).integers(0, 256, (200, 200), dtype=np.uint8)
    assert backend.faces(noise) == []
    with pytest.raises(NoFaceError):
        backend.embed(noise)


def test_all_faces_mode_returns_every_face_largest_first(backend, hopper):
    a = load_rgb(hopper)
    side = np.concatenate([a, a[:, ::-1]], axis=1)
    faces = backend.faces(side, "all")
    assert len(faces) == 2
    assert faces[0].area >= faces[1].area
    assert len(backend.faces(side, "largest")) == 1


def test_unknown_backend_and_missing_model():
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("nope")
    with pytest.raises(ModelError, match="needs a model file"):
        make_backend("onnx")


def test_center_mode_picks_the_face_nearest_the_centre(backend, hopper):
    a = load_rgb(hopper)
    h, w = a.shape[:2]
    small = np.asarray(Image.fromarray(a).resize((w // 2, h // 2)))
    canvas = np.full((h, w * 2 + w // 2, 3), 128, np.uint8)
    canvas[:, :w] = a  # large face, left
    x0 = (canvas.shape[1] - small.shape[1]) // 2 + w // 4
    canvas[h // 4: h // 4 + small.shape[0], x0: x0 + small.shape[1]] = small  # small face, right of centre
    largest, = backend.faces(canvas, "largest")
    center, = backend.faces(canvas, "center")
    assert largest.box[0] < w // 2 < center.box[0]
    assert largest.area > center.area
    with pytest.raises(ValueError, match="which must be"):
        backend.faces(canvas, "biggest")


def test_jitter_and_flip_are_reproducible_and_stay_close(hopper):
    tta = make_backend("dlib-resnet128", jitter=6, flip=True)  # test-time augmentation is the dlib backend's
    e1, e2 = tta.embed(hopper), tta.embed(hopper)
    assert np.array_equal(e1, e2)
    assert 0 < tta.distance(e1, make_backend("dlib-resnet128").embed(hopper)) < 0.25
    assert tta.options()["jitter"] == 6 and tta.options()["flip"] is True


def test_onnx_engine_equals_dlib_engine(hopper):
    a = make_backend("dlib-resnet128").faces(hopper)[0]
    b = make_backend("dlib-resnet128", engine="dlib").faces(hopper)[0]
    assert np.array_equal(a.chip, b.chip)
    assert np.abs(a.embedding - b.embedding).max() < 1e-5
