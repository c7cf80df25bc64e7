//! Real-shape C1 outputs without sealing (work in progress).
