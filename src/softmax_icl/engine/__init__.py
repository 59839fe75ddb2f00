"""The compiled CPU engines of both papers' trainers, with what they share.

* :mod:`.regression` (``regression.c``): paper 1's training step, sampling and loss fused, and its scans;
* :mod:`.classification` (``classification.c``): paper 2's task sampler and the classifiers' loss and gradient;
* :mod:`.common`: the build (the system C compiler, once per machine) and a step's update (``adam.h``);
* ``philox.h``: the counter-based generator of :mod:`softmax_icl.streams` in C and its one conversion of words to
  floats, for both engines;
* :mod:`.philox_triton`: the generator's words on a CUDA GPU (an option of the PyTorch path);
* :mod:`.build`: ``python -m softmax_icl.engine.build`` builds both engines at once.

The PyTorch code (:mod:`softmax_icl.streams`, :mod:`softmax_icl.models`, :mod:`softmax_icl.classification`) is the
reference every engine is tested against, and what runs on a GPU.
"""
