"""Trigonometric and hyperbolic functions and their inverses: Sin ... Atanh, one entry each.

Each is one kernel IR intrinsic (codegen's float64 implementations, no libm: float32 results are
correctly rounded but in near-halfway cases, float64 ones within a few ulps; float16 computes in
float32). The references compute in float64 and round to the input's dtype.
"""

from __future__ import annotations

import numpy as np

from tvmc.kernel import acos, acosh, asin, asinh, atan, atanh, cos, cosh, sin, sinh, tan
from tvmc.ops.common import FLOAT_DTYPES, unary_rule
from tvmc.ops.elementwise.unary import unary, wide_reference

FUNCTIONS = [
    ("Sin", np.sin, sin, "Sine (radians)."),
    ("Cos", np.cos, cos, "Cosine (radians)."),
    ("Tan", np.tan, tan, "Tangent (radians)."),
    ("Asin", np.arcsin, asin, "Arcsine in [-pi/2, pi/2]; NaN outside [-1, 1]."),
    ("Acos", np.arccos, acos, "Arccosine in [0, pi]; NaN outside [-1, 1]."),
    ("Atan", np.arctan, atan, "Arctangent in [-pi/2, pi/2]."),
    ("Sinh", np.sinh, sinh, "Hyperbolic sine."),
    ("Cosh", np.cosh, cosh, "Hyperbolic cosine."),
    ("Asinh", np.arcsinh, asinh, "Inverse hyperbolic sine."),
    ("Acosh", np.arccosh, acosh, "Inverse hyperbolic cosine; NaN below 1."),
    ("Atanh", np.arctanh, atanh, "Inverse hyperbolic tangent; +-inf at +-1, NaN beyond."),
]

DEFINITIONS = [
    unary(name, wide_reference(reference), lambda a, x, f=intrinsic: f(x), doc=doc,
          infer=unary_rule(name, FLOAT_DTYPES, "float"))
    for name, reference, intrinsic, doc in FUNCTIONS
]  # fmt: skip
