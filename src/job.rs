//! The seam between proof kinds and the engine: what the partition machinery (admission, witness,
//! a, b, c, backends, epilogue, verification — [`crate::engine`]) needs from one checked input
//! of any kind. PoRep C2 (`engine`'s sector) and PoSt ([`crate::post`]) implement `Job`; the
//! circuit is always the kind's own filecoin circuit, recorded once ([`crate::circuit`]).

use std::path::Path;

use blstrs::{Bls12, Scalar as Fr};

use crate::circuit::{CompiledCircuit, Layout, Witness};
use crate::error::Result;
use crate::synth::Assignment;

/// The kinds of proof the engine makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProofKind {
    /// PoRep commit phase 2 (`StackedCircuit`; filecoin-proofs' `seal_commit_phase2`).
    PorepC2,
    /// One WindowPoSt partition (`FallbackPoStCircuit`; filecoin-proofs-api's
    /// `generate_single_window_post_with_vanilla`).
    WindowPost,
    /// WinningPoSt (`FallbackPoStCircuit`; filecoin-proofs-api's
    /// `generate_winning_post_with_vanilla`).
    WinningPost,
    /// A SnapDeals sector update (`EmptySectorUpdateCircuit`; filecoin-proofs-api's
    /// `update::generate_empty_sector_update_proof_with_vanilla`).
    SnapDeals,
}

impl ProofKind {
    /// The priority a caller that names none gets for this kind (the C ABI's calls), as Curio
    /// orders its tasks: WinningPoSt [`Critical`](crate::Priority::Critical) (a block waits on
    /// it), WindowPoSt [`High`](crate::Priority::High) (a deadline waits on it), PoRep and
    /// SnapDeals [`Normal`](crate::Priority::Normal).
    pub fn default_priority(self) -> crate::Priority {
        match self {
            ProofKind::PorepC2 | ProofKind::SnapDeals => crate::Priority::Normal,
            ProofKind::WindowPost => crate::Priority::High,
            ProofKind::WinningPost => crate::Priority::Critical,
        }
    }

    /// `"porep-c2"`, `"window-post"`, `"winning-post"` or `"snap-deals"` (logs and messages).
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::PorepC2 => "porep-c2",
            ProofKind::WindowPost => "window-post",
            ProofKind::WinningPost => "winning-post",
            ProofKind::SnapDeals => "snap-deals",
        }
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One checked input of some proof kind, as the engine proves it: its partitions, circuit,
/// public inputs and witness. Shared by the partition workers of one call.
pub(crate) trait Job: Sync {
    /// Names the input in logs and in the host budget's waits (e.g. `sector 4242`).
    fn label(&self) -> String;

    /// Partitions to prove (one 192-byte proof each).
    fn partitions(&self) -> usize;

    /// The proof kind (its parameter set of a [`ProofKind::WinningPost`] is pinned:
    /// [`crate::srs_cache`]).
    fn kind(&self) -> ProofKind;

    /// The `.params` file of the circuit (its `.vk` beside it).
    fn params_path(&self) -> &Path;

    /// An upper bound of one partition's constraints, known before the circuit is recorded
    /// (what the host-memory room of a cold proof is made for).
    fn constraints_bound(&self) -> u64;

    /// Host bytes one partition holds while it is proved (a, b, c in host memory or not),
    /// given the compiled circuit when there is one: by default its constraints, or without
    /// one (reference synthesis, or before the circuit is recorded)
    /// [`Job::constraints_bound`], times [`crate::engine::HOST_BYTES_ABC`] or
    /// [`crate::engine::HOST_BYTES_WITNESS`].
    fn partition_host_bytes(&self, abc_on_host: bool, compiled: Option<&CompiledCircuit>) -> u64 {
        let per = if abc_on_host {
            crate::engine::HOST_BYTES_ABC
        } else {
            crate::engine::HOST_BYTES_WITNESS
        };
        compiled.map_or_else(
            || self.constraints_bound(),
            |cc| cc.layout.num_constraints() as u64,
        ) * per
    }

    /// The compiled circuit's cache name and key ([`crate::circuit::cache`]).
    fn circuit_cache_name_and_key(&self) -> (String, [u8; 32]);

    /// Records the circuit of one partition ([`crate::circuit`]).
    ///
    /// # Errors
    /// [`crate::Error::Internal`] when the circuit cannot be recorded.
    fn compile(&self) -> Result<CompiledCircuit>;

    /// The public inputs of partition `k` (the constant one left out): what the witness's
    /// inputs must equal and the proof is verified against.
    ///
    /// # Errors
    /// [`crate::Error::Internal`] from filecoin-proofs.
    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>>;

    /// The witness z of partition `k` into `w` (compiled path), natively where the kind has a
    /// native witness and `native` is set, by the circuit's gadgets otherwise.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for inputs that make no circuit; [`crate::Error::Synthesis`].
    fn witness_into(&self, layout: &Layout, k: usize, native: bool, w: &mut Witness)
        -> Result<()>;

    /// Whether one partition's witness runs on one thread ([`Job::witness_into`] with
    /// `native` by the circuit's gadgets in one synthesis, with no per-challenge tasks): then
    /// the engine makes as many of its partitions' witnesses at once as the host has cores, not
    /// the GPU workers' count ([`crate::pipeline::Gate::enter_ahead`]): a 32 GiB SnapDeals
    /// partition's gadget witness takes ~20 s of one core against ~1.5 s of GPU work. `false`
    /// by default (the native and per-challenge witnesses use every core).
    fn serial_witness(&self, _native: bool) -> bool {
        false
    }

    /// The reference synthesis of partition `k` (bellpepper, a, b, c on the host).
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`]; [`crate::Error::Synthesis`].
    fn synthesize(&self, k: usize) -> Result<Assignment>;

    /// The kind's own check of the whole proof (`proof`: every partition's 192 bytes, in
    /// order) with the verifying key `pvk`, beyond the engine's check of each partition against
    /// [`Job::public_inputs`]: what filecoin-proofs' verifier of the kind runs on the bytes.
    /// Run before the proof is returned, unless verification is off. None by default.
    ///
    /// # Errors
    /// [`crate::Error::VerificationFailed`] when the proof does not verify.
    fn check_proof(
        &self,
        _proof: &[u8],
        _pvk: &bellperson::groth16::PreparedVerifyingKey<Bls12>,
    ) -> Result<()> {
        Ok(())
    }
}

/// What a value that is not a canonical field element is called in the input checks' messages.
pub(crate) const NOT_CANONICAL: &str = "is not a canonical BLS12-381 scalar field element";

/// Whether `bytes` are a canonical BLS12-381 scalar (32 bytes, little endian, below the
/// modulus): what filecoin-proofs' conversions of a Poseidon or SHA-256 digest to a field
/// element expect (it panics with `from_repr failure` otherwise). The PoSt and SnapDeals input
/// checks refuse every vanilla-proof value that is not.
pub(crate) fn is_canonical(bytes: &[u8]) -> bool {
    use ff::PrimeField;
    <[u8; 32]>::try_from(bytes).is_ok_and(|repr| Fr::from_repr(repr).is_some().into())
}

/// The file name of `path` (a parameter file's: the compiled circuit's cache names derive from
/// it), empty for a path without one.
/// Decodes a vanilla proof as filecoin-proofs-api encodes it (bincode, fixed-width integers,
/// little endian), with no bytes left over: `bincode::deserialize` ignores trailing bytes,
/// which would let a proof with anything appended through unnoticed.
pub(crate) fn decode_vanilla<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> bincode::Result<T> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .deserialize(bytes)
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}
