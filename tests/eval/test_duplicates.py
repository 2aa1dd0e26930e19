"""eval.duplicates: one photo under two names is found by its pixels (also re-encoded and rescaled), two photos of
one person or of two people are not; on the held-out LFW identities it finds exactly the two known pairs."""
import numpy as np
import pytest
from PIL import Image

from privface.eval.duplicates import cross_identity_duplicates


def _photo(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)  # smooth content, like a face at thumbnail size
    return Image.fromarray(small).resize((250, 250), Image.Resampling.BICUBIC)


def test_same_photo_under_two_names_only(tmp_path):
    a, b, c = _photo(1), _photo(2), _photo(3)
    files = {"x_1.png": a, "y_1.jpg": a, "x_2.png": b, "x_3.png": b, "z_1.png": c.resize((125, 125)),
             "w_1.jpg": c}
    paths = []
    for name, img in files.items():
        img.save(tmp_path / name, quality=85)
        paths.append(tmp_path / name)
    ids = [n.split("_")[0] for n in files]
    got = {(paths[i].name, paths[j].name) for i, j, _ in cross_identity_duplicates(paths, ids)}
    # x_2/x_3 are one photo of one person: kept; a rescaled copy under another name is still the same photo
    assert got == {("x_1.png", "y_1.jpg"), ("z_1.png", "w_1.jpg")}


@pytest.mark.dataset
def test_lfw_calibration_duplicates(data_root):
    from privface.eval.default_tau import calibration_set

    ds, dropped = calibration_set(str(data_root))
    assert [d["images"] for d in dropped] == [["Carlos_Beltran_0001.jpg", "Raul_Ibanez_0001.jpg"],
                                             ["Emmy_Rossum_0001.jpg", "Eva_Amurri_0001.jpg"]]
    assert len(ds.paths) == 2328 - 4
