#!/usr/bin/env python3
"""Components of a witness profile (see PROFILE.md): LC construction, allocation, per gadget."""
import json, re, sys, collections
d = json.load(open(sys.argv[1])); T = d['total']
selfc = d['self']; edges = d['edges']
incl_from = collections.Counter()
def is_lc(f):
    return bool(re.search(r'bellpepper_core::lc::|LinearCombination|Boolean::lc|MultiEq<Scalar,CS>::(enforce_equal|accumulate)|Elt<Scalar>::(add|scale|lc)|neptune::circuit::scalar_product|Num<Scalar>::(add_bool_with_coeff|lc)', f))
def is_alloc(f):
    return bool(re.search(r'^(malloc|free|realloc|calloc|_int_malloc|_int_free|_int_realloc|__rustc::__rust_(alloc|dealloc|realloc|alloc_zeroed)|__rustc::__rdl_|alloc::raw_vec::|unlink_chunk|malloc_consolidate|cfree)', f))
def is_mem(f): return '__memcpy' in f or 'memmove' in f or '__memset' in f
lc = sum(c for a, b, c in edges if is_lc(b) and not is_lc(a))
lc += sum(c for f, fi, c in selfc if not is_lc(f) and fi and fi.endswith('/lc.rs'))
al = sum(c for a, b, c in edges if is_alloc(b) and not is_alloc(a) and not is_lc(a))
al_in_lc = sum(c for a, b, c in edges if is_alloc(b) and is_lc(a))
mem = sum(c for a, b, c in edges if is_mem(b) and not is_lc(a) and not is_alloc(a))
print(f"total {T:,}")
print(f"LC construction (incl. its malloc/memmove): {lc:,} {100*lc/T:.1f}%  (alloc inside LC code {al_in_lc:,})")
print(f"allocation outside LC code: {al:,} {100*al/T:.1f}%")
print(f"memcpy outside LC/alloc code: {mem:,} {100*mem/T:.1f}%")
tot_alloc = sum(c for f, fi, c in selfc if is_alloc(f))
print(f"allocator self cost (all callers): {tot_alloc:,} {100*tot_alloc/T:.1f}%")
def incl(pat):
    r = re.compile(pat)
    return sum(c for a, b, c in edges if r.search(b) and not r.search(a))
for label, pat in [
    ('sha256 gadget', r'gadgets::sha256::sha256$'),
    ('  UInt32::addmany', r'UInt32::addmany$'),
    ('    MultiEq::enforce_equal', r'MultiEq<Scalar,CS>::enforce_equal$'),
    ('    Boolean::lc', r'Boolean::lc$'),
    ('  UInt32::xor', r'UInt32::xor$'),
    ('  sha256_maj+ch', r'UInt32::sha256_(maj|ch)$'),
    ('  rotr+shr', r'UInt32::(rotr|shr)$'),
    ('PoR (all)', r'PoRCircuit<Tree>::synthesize$'),
    ('neptune poseidon_hash', r'neptune::circuit::poseidon_hash$'),
    ('  product_mds', r'PoseidonCircuit<Scalar,A>::product_mds$'),
    ('  full_round', r'PoseidonCircuit<Scalar,A>::full_round$'),
    ('Poseidon constants (once)', r'try_call_once_slow'),
    ('create_label_circuit', r'create_label_circuit$'),
    ('to_bits_le', r'AllocatedNum<Scalar>::to_bits_le$'),
    ('pack_bits', r'multipack::pack_bits$'),
    ('WitnessWriter::alloc (non-inlined)', r'WitnessWriter as .*>::alloc$'),
    ('drop SynthesisError', r'drop_in_place<bellpepper_core::constraint_system::SynthesisError>'),
    ('blst_fr_mul', r'^blst_fr_mul$'),
]:
    v = incl(pat); print(f"{label:40s} {v:>14,} {100*v/T:5.1f}%")
ww = sum(c for f, fi, c in selfc if 'WitnessWriter' in f or (fi and 'src/circuit/witness.rs' in fi))
print(f"{'self cost in WitnessWriter code':40s} {ww:>14,} {100*ww/T:5.1f}%")
