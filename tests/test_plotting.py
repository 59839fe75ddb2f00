"""Figure saving: both files, one layout, the same bounding box."""

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from softmax_icl.plotting import save, use_style  # noqa: E402


def test_save_writes_png_and_pdf_of_the_same_tight_box(tmp_path):
    use_style()
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    for ax in axes:
        ax.plot([1, 10, 100], [1, 3, 9], label="curve")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="error")
        ax.legend()
    png, pdf = save(fig, tmp_path, "fig")
    assert png.suffix == ".png" and pdf.suffix == ".pdf" and pdf.stat().st_size > 0
    data = png.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    text = pdf.read_bytes()
    box = text[text.index(b"/MediaBox"):].split(b"]")[0].split(b"[")[1].split()
    pdf_w, pdf_h = float(box[2]) - float(box[0]), float(box[3]) - float(box[1])
    dpi = matplotlib.rcParams["savefig.dpi"]
    # the same bounding box in both files (inches), cropped from the 6 x 3 in figure, not padded past it
    assert width / dpi == pytest.approx(pdf_w / 72, abs=2 / dpi) and height / dpi == pytest.approx(pdf_h / 72, abs=2 / dpi)
    assert width / dpi <= 6 + 0.2 and height / dpi <= 3 + 0.2
    assert plt.fignum_exists(fig.number)                  # outside a notebook the figure is left open
    plt.close(fig)
