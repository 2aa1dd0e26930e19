"""Which face is used (issue 35 B4) and large photos (B2): two faces of about the same size are refused unless the
caller chooses, the face used is named, and a large photo is downscaled before detection."""
import json

import numpy as np
import pytest
from PIL import Image

import privface
from privface import demo_data
from privface.cli import main
from privface.errors import AmbiguousFaceError, FaceError, NoFaceError
from privface.faces.detect import MAX_SIDE, SAME_SIZE
from privface.faces.registry import make_backend


@pytest.fixture(scope="module")
def backend():
    """dlib-resnet128, named: the distance bounds below are dlib's (the default is sface since issue 36)."""
    return make_backend("dlib-resnet128")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    d = tmp_path_factory.mktemp("two")
    out = {}
    for name, scale in (("same", 1.0), ("smaller", 0.5)):
        out[name] = d / f"{name}.png"
        Image.fromarray(demo_data.two_faces(scale)).save(out[name])
    return out


@pytest.fixture(scope="module")
def alone(backend):
    return {"grace": backend.embed(demo_data.enrolled_photo()),
            "eileen": backend.embed(demo_data.impostor_photos()["astronaut (Eileen Collins)"])}


def test_two_faces_of_about_the_same_size_are_refused_naming_both(backend, photos):
    with pytest.raises(AmbiguousFaceError) as e:
        backend.embed(photos["same"])
    boxes = privface.detect(photos["same"])
    assert len(boxes) == 2 and e.value.boxes == boxes
    assert (boxes[1][2] - boxes[1][0]) * (boxes[1][3] - boxes[1][1]) >= SAME_SIZE * (
        (boxes[0][2] - boxes[0][0]) * (boxes[0][3] - boxes[0][1]))
    message = str(e.value)
    assert str(photos["same"]) in message and "face 0 at" in message and "face 1 at" in message
    assert "--face N" in message and "which=N" in message
    assert isinstance(e.value, FaceError) and not isinstance(e.value, NoFaceError)
    with pytest.raises(AmbiguousFaceError):
        privface.embed(photos["same"])


def test_choosing_a_face_uses_that_face(backend, photos, alone):
    left, right = privface.detect(photos["same"])
    chosen = {i: backend.face(photos["same"], i) for i in (0, 1)}
    for i, box in enumerate((left, right)):
        assert chosen[i].box == box and chosen[i].index == i and chosen[i].found == 2
    who = {i: min(alone, key=lambda k: backend.distance(alone[k], chosen[i].embedding)) for i in (0, 1)}
    assert sorted(who.values()) == ["eileen", "grace"]
    largest = backend.face(photos["same"], "largest")
    assert largest.box == left and "(largest of 2)" in largest.describe()
    np.testing.assert_array_equal(privface.embed(photos["same"], which=1, backend="dlib-resnet128"),
                                  chosen[1].embedding)
    with pytest.raises(FaceError, match="there is no face 2"):
        backend.face(photos["same"], 2)


def test_a_much_smaller_second_face_leaves_the_largest_named(backend, photos, alone):
    face = backend.face(photos["smaller"])
    assert face.found == 2 and face.index == 0
    x, y, r, b = face.box
    assert face.describe() == f"the face at {x},{y} {r - x}×{b - y} (largest of 2)"
    assert backend.distance(face.embedding, alone["grace"]) < backend.threshold
    assert backend.face(demo_data.enrolled_photo()).describe().endswith("(the only one)")


def test_cli_refuses_then_names_the_chosen_face(photos, capsys):
    assert main(["embed", str(photos["same"])]) == 2
    err = capsys.readouterr().err
    assert "2 faces of about the same size" in err and "--face N" in err
    assert main(["embed", "--face", "1", "--json", str(photos["same"])]) == 0
    row = json.loads(capsys.readouterr().out)["faces"][0]
    assert row["face"] == 1 and row["of"] == 2
    assert main(["embed", str(photos["smaller"])]) == 0
    assert "(largest of 2)" in capsys.readouterr().out
    assert main(["compare", "--face", "largest", str(photos["same"]), str(demo_data.enrolled_photo())]) == 0
    out = capsys.readouterr().out
    assert "face_a" in out and "(largest of 2)" in out and "(the only one)" in out
    with pytest.raises(SystemExit):
        main(["embed", "--face", "left", str(photos["same"])])


def test_a_large_photo_is_downscaled_before_detection(backend):
    """A 3000×4000 phone-sized photo: detection runs on a 960×1280 working image; the box comes back in the photo's
    pixels and the template stays that of the face (the browser page downscales the same way)."""
    portrait = Image.open(demo_data.enrolled_photo()).convert("RGB").crop((31, 0, 481, 600))  # 3:4
    big = np.asarray(portrait.resize((3000, 4000), Image.BICUBIC))
    work, scale = backend.detector.working_image(big)
    assert work.shape[:2] == (MAX_SIDE, 960) and scale == pytest.approx(0.32)
    face = backend.face(big)
    ref = backend.face(np.asarray(portrait))
    expected = np.array(ref.box) * 4000 / 600
    assert np.abs(np.array(face.box) - expected).max() < 0.03 * 3000, (face.box, expected)
    assert backend.distance(face.embedding, ref.embedding) < 0.2
