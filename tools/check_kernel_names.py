#!/usr/bin/python3
"""Checks that every kernel has one name end to end (shaders/meson.build).

  * each kernel name (ShaderId) in shaders/meson.build (its rows, and the
    variants it generates from its weight_kernels / storage_kernels tables) is
    its source file's stem, or the stem plus a variant suffix ([_unfused] then
    [_tex | _xtex] then [_f32 | _f16 | _bf16]), and every shaders/*.comp is listed;
  * each stem starts with its family (linear_, norm_, elementwise_, embed,
    attention_, moe_), has its contract list shaders/spec/<stem>.h, which the
    shader includes, and is named in kernels/<family>*.cpp as ShaderId::<stem>...;
  * the method recording it bears the stem's name: Kernels::<stem> (a _q stem:
    its quantized twin, Kernels::<stem without _q>, or Kernels::<stem>), and
    Attention::<stem without attention_> for the attention family, whose
    decode also records attention_decode_lanes and attention_combine;
  * no shader or shared GLSL file binds a bare number (layout(binding = N)):
    binding numbers come from BINDING(n, NAME) in the spec lists;
  * every family host file kernels/<family>[_<sub>].cpp (not the
    infrastructure files) pairs with tests/test_kernels_<family>[_<sub>].cpp
    and a suite kernels_<family>[_<sub>] in tests/meson.build, and back.

Prints every violation and exits 1 if any.  Run by the test suite
(meson test kernel_names).
"""
import pathlib
import re
import sys

FAMILIES = ('linear_', 'norm_', 'elementwise_', 'embed', 'attention_', 'moe_')
INFRASTRUCTURE = {'binding.cpp', 'kernels.cpp', 'quant_layout.cpp', 'quant_binding.cpp', 'kv_calib_layout.cpp'}
VARIANT = re.compile(r'(_unfused)?(_(tex|xtex))?(_(f32|f16|bf16))?')
# Stems an Attention method records besides its own.
SUBKERNELS = {'attention_decode_lanes': 'decode', 'attention_combine': 'decode'}


def methods(header: str, cls: str) -> set:
    m = re.search(r'class %s \{(.*?)\n\};' % cls, header, re.S)
    return set(re.findall(r'\bvoid (\w+)\(', m.group(1))) if m else set()


def kernel_variants(meson: str) -> list:
    """(kernel name, source file) of every SPIR-V module shaders/meson.build builds: its plain rows
    [name, source, [defines]] and the rows it expands, [stem, float storages, quantized storages]
    (weight kernels: <stem><storage>_<f32|f16|bf16> from <stem>.comp, <stem>_q<storage> from
    <stem>_q.comp) and [stem, storages, 'PREFIX'] (<stem><storage> from <stem>.comp)."""
    variants = re.findall(r"\['(\w+)', '([\w.]+)', \[", meson)
    def storages(text: str) -> list:
        return re.findall(r"'(\w*)'", text)
    for stem, fl, qu in re.findall(r"\['(\w+)', \[([^\]]*)\], \[([^\]]*)\]\]", meson):
        variants += [(stem + st + ft, stem + '.comp') for st in storages(fl) for ft in ('_f32', '_f16', '_bf16')]
        variants += [(stem + '_q' + st, stem + '_q.comp') for st in storages(qu)]
    for stem, st_list, _ in re.findall(r"\['(\w+)', \[([^\]]*)\], '(\w+)'\]", meson):
        variants += [(stem + st, stem + '.comp') for st in storages(st_list)]
    return variants


def check(root: pathlib.Path) -> list:
    bad = []
    meson = (root / 'shaders/meson.build').read_text(encoding='utf-8')
    variants = kernel_variants(meson)
    comps = {p.stem for p in (root / 'shaders').glob('*.comp')}
    kernels_hpp = methods((root / 'kernels/kernels.hpp').read_text(encoding='utf-8'), 'Kernels')
    attention_hpp = methods((root / 'kernels/attention.hpp').read_text(encoding='utf-8'), 'Attention')
    host = {p.name: p.read_text(encoding='utf-8') for p in (root / 'kernels').glob('*.cpp')}

    listed = set()
    for name, src in variants:
        stem = src[:-len('.comp')]
        listed.add(stem)
        if not name.startswith(stem) or not VARIANT.fullmatch(name[len(stem):]):
            bad.append(f'shaders/meson.build: kernel {name} is not {stem} or {stem}_<variant>')
        if not any(f'ShaderId::{name}' in text for text in host.values()):
            bad.append(f'shaders/meson.build: kernel {name}: no kernels/*.cpp names ShaderId::{name}')
    for stem in sorted(comps - listed):
        bad.append(f'shaders/{stem}.comp: not listed in shaders/meson.build')

    for stem in sorted(comps):
        family = next((f for f in FAMILIES if stem.startswith(f)), None)
        if family is None:
            bad.append(f'shaders/{stem}.comp: the stem starts with no family ({", ".join(FAMILIES)})')
            continue
        spec = root / 'shaders/spec' / f'{stem}.h'
        if not spec.exists():
            bad.append(f'shaders/{stem}.comp: no contract list shaders/spec/{stem}.h')
        elif f'#include "spec/{stem}.h"' not in (root / 'shaders' / f'{stem}.comp').read_text(encoding='utf-8'):
            bad.append(f'shaders/{stem}.comp: does not include "spec/{stem}.h"')
        fam = family.rstrip('_')
        if not any(n.startswith(fam) and f'ShaderId::{stem}' in t for n, t in host.items()):
            bad.append(f'shaders/{stem}.comp: no kernels/{fam}*.cpp records ShaderId::{stem}...')
        if family == 'attention_':
            method = SUBKERNELS.get(stem, stem[len(family):])
            if method not in attention_hpp:
                bad.append(f'shaders/{stem}.comp: no method Attention::{method}')
        else:
            names = {stem, stem[:-2]} if stem.endswith('_q') else {stem}
            if not names & kernels_hpp:
                bad.append(f'shaders/{stem}.comp: no method Kernels::{" or Kernels::".join(sorted(names))}')

    for path in sorted(list((root / 'shaders').glob('*.comp')) + list((root / 'shaders').glob('*.glsl'))):
        for n, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
            if re.search(r'\bbinding\s*=\s*\d', line):
                bad.append(f'shaders/{path.name}:{n}: a bare binding number (use BINDING(n, NAME) in shaders/spec)')

    suites = set(re.findall(r"\['(kernels_\w+)', files\('test_(kernels_\w+)\.cpp'\)", (root / 'tests/meson.build').read_text(encoding='utf-8')))
    families = {n[:-len('.cpp')] for n in host if n not in INFRASTRUCTURE}
    tests = {p.stem[len('test_kernels_'):] for p in (root / 'tests').glob('test_kernels_*.cpp')}
    for f in sorted(families):
        if f not in tests:
            bad.append(f'kernels/{f}.cpp: no tests/test_kernels_{f}.cpp')
        if (f'kernels_{f}', f'kernels_{f}') not in suites:
            bad.append(f'kernels/{f}.cpp: no suite kernels_{f} built from test_kernels_{f}.cpp in tests/meson.build')
    for t in sorted(tests - families):
        bad.append(f'tests/test_kernels_{t}.cpp: no kernels/{t}.cpp')
    kmeson = (root / 'kernels/meson.build').read_text(encoding='utf-8')
    for n in sorted(INFRASTRUCTURE):
        if n not in kmeson:
            bad.append(f'kernels/meson.build: infrastructure file {n} not listed')
    return bad


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    bad = check(root)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
