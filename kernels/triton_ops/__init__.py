"""Triton kernels of the GPU path (``TritonKernels`` in ``backend``). Importing this package needs triton.

Set ``TRITON_INTERPRET=1`` before importing it to run the kernels on CPU tensors with Triton's
interpreter (the tests do): the flag is read when the kernels are defined.
"""
