//! STUB (replaced by the helper's module).
#![allow(missing_docs, unused)]
use super::Tape;
use blstrs::Scalar as Fr;
#[derive(Clone, Copy)]
pub struct Bit;
pub fn replica_id_bits(_: &Fr) -> Vec<Bit> {
    unimplemented!()
}
pub fn label_bits(_: &mut Tape, _: &Fr) -> Vec<Bit> {
    unimplemented!()
}
pub fn uint64_alloc(_: &mut Tape, _: u64) -> Vec<Bit> {
    unimplemented!()
}
pub fn create_label(_: &mut Tape, _: &[Bit], _: &[&[Bit]], _: u32, _: &[Bit]) -> Fr {
    unimplemented!()
}
pub fn hash_multi_leaf2(_: &mut Tape, _: &[Fr]) -> Fr {
    unimplemented!()
}
