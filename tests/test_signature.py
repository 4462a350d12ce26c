"""Kernel parameter lists from CUDA C declarations and GrCUDA signature strings."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu as ag

from asyncgpu.core.errors import ArgumentError, CompileError, SignatureError
from asyncgpu.runtime.signature import (
    Param,
    check_declaration,
    parse_cuda_declaration,
    parse_grcuda_signature,
)

F32, F64, I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)


def one(decl: str, name: str = "k") -> Param:
    (p,) = parse_cuda_declaration(f'extern "C" __global__ void {name}({decl}) {{}}', name)
    return p


# -- CUDA C declarations ------------------------------------------------------------------
def test_vec_reduce_kernel():
    src = 'extern "C" __global__ void reduce(const float* x, const float* y, float* z, int n) {}'
    assert parse_cuda_declaration(src, "reduce") == (
        Param("x", True, F32, True, "const float*"),
        Param("y", True, F32, True, "const float*"),
        Param("z", True, F32, False, "float*"),
        Param("n", False, I32, False, "int"),
    )


MULTI = r'''
#include <cuda_fp16.h>
#define KERNEL __global__ void fake(int q)   /* a macro is no kernel */
// __global__ void commented_out(float* a)
__device__ float helper(const float* p, int i) { return p[i]; }

extern "C" {
/* a block comment
   __global__ void hidden(double* h)
*/
__global__ void __launch_bounds__(256, 2)
square(const float* __restrict__ x,   // input
       float* __restrict__ y,         /* output */
       int n)
{
    const char* s = "// not a comment";
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = helper(x, i) * x[i];
}

__global__ void reduce_all(const double* x, double* out, unsigned long long n) {}

__global__ void
reduce(
    const float *x,  // comment, with a comma
    float *z,
    size_t n
) {}
}
'''


def test_multi_kernel_source_with_comments_and_launch_bounds():
    assert parse_cuda_declaration(MULTI, "square") == (
        Param("x", True, F32, True, "const float*"),
        Param("y", True, F32, False, "float*"),
        Param("n", False, I32, False, "int"),
    )


def test_kernel_whose_name_prefixes_another_is_found_exactly():
    assert [p.name for p in parse_cuda_declaration(MULTI, "reduce")] == ["x", "z", "n"]
    assert parse_cuda_declaration(MULTI, "reduce")[2].dtype == np.dtype(np.uint64)
    assert [p.name for p in parse_cuda_declaration(MULTI, "reduce_all")] == ["x", "out", "n"]
    src = "__global__ void reduce_all(double* a) {}\n__global__ void reduce(float* b) {}"
    assert parse_cuda_declaration(src, "reduce")[0].name == "b"


def test_missing_kernel_lists_the_kernels_found():
    with pytest.raises(CompileError, match=r"kernel 'helper' is not declared as __global__ in the "
                       r"source; kernels found: square, reduce_all, reduce$"):
        parse_cuda_declaration(MULTI, "helper")
    for hidden in ("hidden", "commented_out", "fake"):
        with pytest.raises(CompileError, match=rf"kernel '{hidden}' is not declared"):
            parse_cuda_declaration(MULTI, hidden)
    with pytest.raises(CompileError, match=r"kernels found: none"):
        parse_cuda_declaration("__device__ void k(int n) {}", "k")
    with pytest.raises(CompileError, match=r"kernels found: red$"):
        parse_cuda_declaration("__global__ void red(int n);", "re")


def test_extern_c_alone_block_and_absent():
    for src in ('extern "C" __global__ void k(float* a) {}',
                'extern "C" {\n__global__ void k(float* a) {}\n}',
                "__global__ void k(float* a);"):
        assert parse_cuda_declaration(src, "k") == (Param("a", True, F32, False, "float*"),)


def test_other_attributes_between_void_and_name():
    for attr in ("__launch_bounds__(128)", "__launch_bounds__(MAX_THREADS(4), 2, 1)",
                 "__launch_bounds__ ( 64 )\n", "__attribute__((noinline))", "[[nodiscard]]",
                 "__launch_bounds__(1024) __maxnreg__(32)"):
        src = f'extern "C" __global__ void {attr} k(double* a, int n) {{}}'
        assert [p.name for p in parse_cuda_declaration(src, "k")] == ["a", "n"], attr


def test_line_breaks_and_comments_anywhere():
    src = ('extern/**/"C"\n__global__\nvoid\n/* x */ k /* y */ (\n  const /* c */ float\n'
           "  * // star\n  x , int // n\n n ) {}")
    assert parse_cuda_declaration(src, "k") == (
        Param("x", True, F32, True, "const float*"),
        Param("n", False, I32, False, "int"),
    )


@pytest.mark.parametrize("decl", ["", "void", " void ", "/* none */"])
def test_empty_and_void_parameter_lists(decl):
    assert parse_cuda_declaration(f"__global__ void k({decl}) {{}}", "k") == ()


@pytest.mark.parametrize("decl, const, ctype", [
    ("const float* x", True, "const float*"),
    ("float const* x", True, "float const*"),
    ("float const * x", True, "float const*"),
    ("const float* const x", True, "const float* const"),
    ("float* const x", False, "float* const"),
    ("float * __restrict__ x", False, "float*"),
    ("const float* restrict x", True, "const float*"),
    ("const float* __restrict x", True, "const float*"),
    ("const float x[]", True, "const float*"),
    ("volatile float* x", False, "volatile float*"),
])
def test_const_placement(decl, const, ctype):
    p = one(decl)
    assert (p.name, p.is_array, p.dtype, p.const, p.ctype) == ("x", True, F32, const, ctype)


POINTERS_TO_POINTERS = ["float** x", "const float** x", "float* const* x", "float * * x",
                        "float* x[]"]


@pytest.mark.parametrize("decl", POINTERS_TO_POINTERS)
def test_pointer_to_pointer_asks_for_a_signature(decl):
    with pytest.raises(SignatureError, match=r"kernel 'k': parameter 0 .*a pointer to pointers"
                       r'.*ag\.cuda_kernel\(src, "k", signature="\.\.\."\)'):
        one(decl)


@pytest.mark.parametrize("decl", POINTERS_TO_POINTERS)
def test_pointer_to_pointer_is_untyped_and_mutable_when_not_strict(decl):
    src = f'extern "C" __global__ void k({decl}) {{}}'
    (p,) = parse_cuda_declaration(src, "k", strict=False)
    assert (p.is_array, p.dtype, p.const) == (True, None, False)


@pytest.mark.parametrize("ctype, dtype", [
    ("float", "float32"), ("double", "float64"), ("__half", "float16"), ("half", "float16"),
    ("int", "int32"), ("signed", "int32"), ("signed int", "int32"), ("int32_t", "int32"),
    ("unsigned", "uint32"), ("unsigned int", "uint32"), ("uint32_t", "uint32"),
    ("short", "int16"), ("short int", "int16"), ("int16_t", "int16"),
    ("unsigned short", "uint16"), ("uint16_t", "uint16"),
    ("char", "int8"), ("signed char", "int8"), ("int8_t", "int8"),
    ("unsigned char", "uint8"), ("uint8_t", "uint8"),
    ("long", "int64"), ("long int", "int64"), ("long long", "int64"), ("long long int", "int64"),
    ("int64_t", "int64"), ("ptrdiff_t", "int64"), ("ssize_t", "int64"),
    ("unsigned long", "uint64"), ("unsigned long long", "uint64"), ("long unsigned int", "uint64"),
    ("uint64_t", "uint64"), ("size_t", "uint64"), ("std::size_t", "uint64"), ("bool", "bool"),
])
def test_c_type_to_dtype(ctype, dtype):
    scalar, pointer, unnamed = one(f"{ctype} v"), one(f"{ctype}* v"), one(ctype)
    assert scalar == Param("v", False, np.dtype(dtype), False, ctype)
    assert pointer == Param("v", True, np.dtype(dtype), False, f"{ctype}*")
    assert unnamed == Param("arg0", False, np.dtype(dtype), False, ctype)


def test_const_scalar_is_not_const():
    assert one("const int n") == Param("n", False, I32, False, "const int")


def test_unnamed_parameters_get_positional_names():
    src = "__global__ void k(const float*, float*, int, unsigned long long) {}"
    params = parse_cuda_declaration(src, "k")
    assert [p.name for p in params] == ["arg0", "arg1", "arg2", "arg3"]
    assert [p.const for p in params] == [True, False, False, False]
    assert params[3].dtype == np.dtype(np.uint64)


@pytest.mark.parametrize("decl, name", [("float* __restrict__ restricted_out", "restricted_out"),
                                        ("int nrestrict", "nrestrict"),
                                        ("const float* restrict x", "x")])
def test_a_name_that_contains_restrict_is_a_name(decl, name):
    assert one(decl).name == name


def test_a_declaration_before_the_definition_does_not_hide_the_names():
    src = ('extern "C" __global__ void axpy(const float*, float*, float, int);\n'
           'extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {}')
    assert [p.name for p in parse_cuda_declaration(src, "axpy")] == ["x", "y", "a", "n"]


def test_a_signature_whose_pointer_elements_contradict_the_source_is_refused(sim):
    src = 'extern "C" __global__ void scale(const float* x, float* y, int n) {}'
    with pytest.raises(SignatureError, match=r"parameter 0 'x' is 'const float\*' \(elements "
                       r"of 4 bytes\).*8 bytes, float64.*read the wrong bytes"):
        sim.cuda_kernel(src, "scale", signature="x: in pointer double, y: out pointer double, "
                        "n: sint32")
    k = sim.cuda_kernel(src, "scale", signature="x: in pointer float, y: out pointer float, "
                        "n: sint32")
    assert [p.dtype for p in k.params] == [F32, F32, I32]


UNKNOWN_ELEMENTS = ["float2* v", "struct Particle* v", "const cuComplex* v", "Foo<int>* v",
                    "real* v", "T* v", "int4* v"]


@pytest.mark.parametrize("decl", ["void* v", "const void* v"])
def test_void_pointer_takes_any_dtype(decl):
    p = one(decl)
    assert (p.name, p.is_array, p.dtype) == ("v", True, None)
    assert p.const == decl.startswith("const")


@pytest.mark.parametrize("decl", UNKNOWN_ELEMENTS)
def test_pointer_to_unknown_type_asks_for_a_signature_naming_its_elements(decl):
    with pytest.raises(SignatureError, match=r"kernel 'k': parameter 0 .*no C type asyncgpu "
                       r"knows.*'pointer float v'.*'pointer v' for arrays of any dtype"):
        one(decl)


@pytest.mark.parametrize("decl", UNKNOWN_ELEMENTS)
def test_pointer_to_unknown_type_is_untyped_when_not_strict(decl):
    src = f'extern "C" __global__ void k({decl}) {{}}'
    (p,) = parse_cuda_declaration(src, "k", strict=False)
    assert (p.name, p.is_array, p.dtype) == ("v", True, None)
    assert p.const == decl.startswith("const")


def test_a_signature_gives_the_elements_of_a_typedef_pointer():
    src = 'typedef float real;\nextern "C" __global__ void f(real* a, int n) {}'
    k = ag.cuda_kernel(src, "f", "pointer float a, sint32 n", sim=lambda a, n: None)
    assert k.params[0].dtype == F32
    with pytest.raises(ag.ArgumentError):
        k[1, 1](ag.zeros(4, np.float64), 4)


@pytest.mark.parametrize("decl, shown", [("float2 v", "float2"), ("struct Params v",
                                         "struct Params"), ("const cuComplex v", "cuComplex")])
def test_scalar_of_unknown_type_asks_for_a_signature(decl, shown):
    with pytest.raises(SignatureError, match=rf"kernel 'k': parameter 0 .*type '{shown}'.*needs a "
                       r'signature string, e\.g\. ag\.cuda_kernel\(src, "k", signature="\.\.\."\)'):
        one(decl)


def test_unknown_scalar_is_untyped_when_not_strict():
    src = "__global__ void k(float2 v, int n) {}"
    assert parse_cuda_declaration(src, "k", strict=False)[0] == Param("v", False, None, False,
                                                                     "float2")


@pytest.mark.parametrize("decl", ["float& x", "int n, ...", "float* x, , int n"])
def test_unpassable_parameters(decl):
    with pytest.raises(SignatureError, match=r"kernel 'k': parameter \d+ .*not a parameter"):
        parse_cuda_declaration(f"__global__ void k({decl}) {{}}", "k")


@pytest.mark.parametrize("src", [
    'extern "C" __global__ void k(float* x { x[0] = 1; }',
    'extern "C" __global__ void k(float* x, int n; ) {}',
])
def test_a_parameter_list_that_does_not_close_is_refused_naming_the_parameter(src):
    """The GPU's compiler refuses these; the parser took '{' for a parameter's name and the
    launch ran on sim."""
    with pytest.raises(SignatureError, match=r"kernel 'k': parameter \d .* does not close"):
        parse_cuda_declaration(src, "k")


def test_a_kernel_declared_with_two_signatures_is_refused_naming_both():
    src = ('extern "C" __global__ void k(float* x) {}\n'
           'extern "C" __global__ void k(int* x) {}')
    with pytest.raises(SignatureError, match=r"declared with different parameters: "
                                             r"\(float\*\); \(int\*\)"):
        parse_cuda_declaration(src, "k")
    # (a declaration and its definition, one naming the parameters, are one signature)
    same = 'extern "C" __global__ void k(const float*, int);\n' \
           'extern "C" __global__ void k(const float* x, int n) {}'
    assert [p.name for p in parse_cuda_declaration(same, "k")] == ["x", "n"]


def test_void_scalar_is_rejected_even_when_not_strict():
    with pytest.raises(SignatureError, match=r"type 'void'"):
        parse_cuda_declaration("__global__ void k(void, int n) {}", "k", strict=False)


@pytest.mark.parametrize("src", [
    "template <typename T>\n__global__ void k(T* x, int n) {}",
    "template<int N> __global__ void __launch_bounds__(N) k(float* x) {}",
    "template <typename T, int N = 4> static __global__ void k(T* x) {}",
])
def test_templated_kernel_needs_extern_c_wrapper(src):
    with pytest.raises(SignatureError, match=r"kernel 'k' is a template.*extern \"C\""):
        parse_cuda_declaration(src, "k")


def test_template_elsewhere_does_not_taint_a_plain_kernel():
    src = ("template <typename T> __device__ T twice(T v) { return 2 * v; }\n"
           'extern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }')
    assert parse_cuda_declaration(src, "k") == (Param("x", True, F32, False, "float*"),)


# -- GrCUDA signatures --------------------------------------------------------------------
def test_nfi_example_from_grcuda():
    assert parse_grcuda_signature("const pointer x, pointer y, sint32 n") == (
        Param("x", True, None, True, "const pointer"),
        Param("y", True, None, False, "pointer"),
        Param("n", False, I32, False, "sint32"),
    )


def test_nfi_without_names_and_with_extra_whitespace():
    assert parse_grcuda_signature("  pointer const,pointer ,\tfloat,  sint32") == (
        Param("arg0", True, None, True, "const pointer"),
        Param("arg1", True, None, False, "pointer"),
        Param("arg2", False, F32, False, "float"),
        Param("arg3", False, I32, False, "sint32"),
    )


def test_nfi_mixed_names_and_typed_pointers():
    params = parse_grcuda_signature("pointer, float alpha, pointer float y, const pointer double")
    assert [p.name for p in params] == ["arg0", "alpha", "y", "arg3"]
    assert [p.dtype for p in params] == [None, F32, F32, F64]
    assert [p.const for p in params] == [False, False, False, True]


def test_nidl_style():
    assert parse_grcuda_signature(
        "x: in pointer float, y: out pointer float, z: inout pointer double, n: sint32, "
        "p: pointer, q: const pointer sint64"
    ) == (
        Param("x", True, F32, True, "in pointer float"),
        Param("y", True, F32, False, "out pointer float", out=True),
        Param("z", True, F64, False, "inout pointer double"),
        Param("n", False, I32, False, "sint32"),
        Param("p", True, None, False, "pointer"),
        Param("q", True, np.dtype(np.int64), True, "const pointer sint64"),
    )


@pytest.mark.parametrize("token, dtype", [
    ("sint8", "int8"), ("sint16", "int16"), ("sint32", "int32"), ("sint64", "int64"),
    ("uint8", "uint8"), ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
    ("float", "float32"), ("double", "float64"), ("char", "int8"), ("bool", "bool"),
])
def test_grcuda_type_tokens(token, dtype):
    assert parse_grcuda_signature(f"{token} v, {token}, w: {token}, e: pointer {token}") == (
        Param("v", False, np.dtype(dtype), False, token),
        Param("arg1", False, np.dtype(dtype), False, token),
        Param("w", False, np.dtype(dtype), False, token),
        Param("e", True, np.dtype(dtype), False, f"pointer {token}"),
    )


def test_out_defaults_to_false():
    assert Param("x", True, None, False, "pointer").out is False
    assert not any(p.out for p in parse_grcuda_signature("const pointer, pointer, x: in pointer"))


@pytest.mark.parametrize("sig, match", [
    ("pointer x, pointr y", r"signature parameter 1 \('pointr y'\): unknown type 'pointr'"),
    ("float128", r"signature parameter 0 \('float128'\): unknown type 'float128'"),
    ("pointer, n: int", r"signature parameter 1 .*unknown type 'int'"),
    ("x: in pointer flaot", r"signature parameter 0 .*unknown element type 'flaot'"),
    ("pointer float128 x", r"signature parameter 0 .*unknown element type 'float128'"),
    ("pointer, sint32, const sint32 n", r"signature parameter 2 .*'const' applies to pointers, "
                                        r"not to scalar type 'sint32'"),
    ("n: in sint32", r"signature parameter 0 .*'in' applies to pointers"),
    ("pointer, out float a", r"signature parameter 1 .*'out' applies to pointers"),
    ("n: inout sint64", r"signature parameter 0 .*'inout' applies to pointers"),
    ("pointer, , sint32", r"signature parameter 1 is empty"),
    ("pointer,", r"signature parameter 1 is empty"),
    ("", r"signature parameter 0 is empty"),
    ("pointer x, sint32 x", r"signature parameter 1 .*duplicate name 'x'"),
    ("pointer arg1, pointer", r"signature parameter 1 .*duplicate name 'arg1'"),
    ("x: pointer, x: sint32", r"signature parameter 1 .*duplicate name 'x'"),
    ("x: out const pointer", r"signature parameter 0 .*'const' contradicts 'out'"),
    ("x: in out pointer", r"signature parameter 0 .*'out' contradicts 'in'"),
    ("const", r"signature parameter 0 .*missing type after 'const'"),
    ("x:", r"signature parameter 0 .*missing type"),
    ("1x: pointer", r"signature parameter 0 .*'1x' is not a parameter name"),
    ("sint32 n m", r"signature parameter 0 .*unexpected token 'n'"),
    ("n: sint32 m", r"signature parameter 0 .*unexpected token 'm'"),
    ("pointer float x y", r"signature parameter 0 .*unexpected token 'x'"),
    ("sint32 pointer", r"signature parameter 0 .*unexpected token 'pointer'"),
])
def test_signature_errors(sig, match):
    with pytest.raises(SignatureError, match=match):
        parse_grcuda_signature(sig)


def test_signature_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_grcuda_signature("pointr")


@pytest.mark.parametrize("src", [
    'extern "C" __global__ void k(float* x) {}',
    'extern "C"\n__global__ void __launch_bounds__(256, 2)\nk(float* x) {}',
    'extern "C" {\n  __device__ float f(float v) { return v; }\n  __global__ void k(float* x) {}\n}',
    'extern "C" void __global__ k(float* x) {}',
    '__global__ void other(int* y) {}\nextern "C" __global__ void k(float* x) {}',
])
def test_a_kernel_with_c_linkage_in_any_form_is_accepted(src):
    check_declaration(src, "k", parse_cuda_declaration(src, "k"))


@pytest.mark.parametrize("src,pattern", [
    ('__global__ void k(float* x) {}', r'not declared extern "C"'),
    ('extern "C" { __global__ void f(int* y) {} }\n__global__ void k(float* x) {}',
     r'not declared extern "C"'),
    ('extern "C" __global__ int k(float* x) {}', r"returns a value"),
    ('extern "C" __global__ void k(float* x, int x) {}', r"two parameters are named 'x'"),
])
def test_what_the_gpu_would_refuse_is_refused_from_the_declaration(src, pattern):
    with pytest.raises(SignatureError, match=pattern):
        check_declaration(src, "k", parse_cuda_declaration(src, "k"))


def test_a_parameters_cpp_default_value_is_not_its_name():
    params = parse_cuda_declaration(
        'extern "C" __global__ void k(float* a, int n = 4, float s=0.5f) {}', "k")
    assert [p.name for p in params] == ["a", "n", "s"]
    assert params[1].dtype == np.dtype(np.int32)


def test_a_numba_kernel_given_a_signature_takes_only_what_it_declares():
    """The check the cuda backend makes before compiling such a kernel (Numba hands its one
    overload to arguments of any types): same dtype, rank and layout (``A`` takes any), an
    integer in the declared one's range, a number a float parameter converts."""
    from numba.core import types as nb

    from asyncgpu.backends.cuda.kernels import _refuse_undeclared

    class Param:
        def __init__(self, name):
            self.name = name

    class Fill:
        name, params = "fill", (Param("x"), Param("n"))

    declared = (nb.Array(nb.float32, 1, "C"), nb.int32)
    c32 = nb.Array(nb.float32, 1, "C")
    for got, n in (((c32, nb.int64), 3), ((nb.Array(nb.float32, 1, "C", readonly=True),
                                           nb.int16), 7)):
        _refuse_undeclared(Fill, None, declared, got, [None, n])
    _refuse_undeclared(Fill, None, (nb.Array(nb.float32, 2, "A"), nb.float32),
                       (nb.Array(nb.float32, 2, "F"), nb.int64), [None, 3])
    for got, n, match in (((nb.Array(nb.float64, 1, "C"), nb.int64), 3,
                           r"argument 'x' is array\(float64, 1d, C\), and the kernel's "
                           r"signature declares array\(float32, 1d, C\)"),
                          ((nb.Array(nb.float32, 1, "A"), nb.int64), 3, "1d, A"),
                          ((c32, nb.int64), 2**40, "argument 'n' is int64.*declares int32"),
                          ((c32, nb.float64), 2.5, "argument 'n' is float64")):
        with pytest.raises(ArgumentError, match=f"kernel 'fill': .*{match}"):
            _refuse_undeclared(Fill, None, declared, got, [None, n])
