//! The native witnesses of the PoRep, PoSt and SnapDeals circuits: SHA-256 and Poseidon
//! computed directly and written in the gadgets' allocation order into a challenge's or a
//! sector's block of aux values (see [`tape`]; [`block`] for PoRep, [`post`] for PoSt,
//! [`snap`] for SnapDeals).
//!
//! Safe because nothing here is trusted: the witness is checked against the recorded R1CS
//! (a∘b = c on every row) before any MSM, and tests compare it value for value with the gadget
//! witness (`CUZK_SYNTHESIS=gadget`).

pub mod sha256;
pub mod tape;

pub use tape::Tape;
pub mod block;
pub mod column;
pub mod por;
pub mod poseidon;
pub mod post;
pub mod snap;
