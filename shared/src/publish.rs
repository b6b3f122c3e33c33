//! The published handle: the two pointers every worker reads.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::cert::CertStore;
use crate::generation::Generation;

/// What is serving now. One per process, shared by the applier (the only writer) and every worker.
pub struct Published {
    certs: ArcSwap<CertStore>,
    generation: ArcSwap<Generation>,
}

impl Default for Published {
    fn default() -> Self {
        Self::new()
    }
}

impl Published {
    pub fn new() -> Self {
        Published {
            certs: ArcSwap::from_pointee(CertStore::default()),
            generation: ArcSwap::from_pointee(Generation::empty()),
        }
    }

    /// Makes `generation` the one every new request uses.
    ///
    /// Two stores, in this order and never the other: first the certificate store, which must
    /// already hold every certificate the generation's table names; then the table. A worker that
    /// loads the new table therefore always finds its certificates, and a worker still on the old
    /// table finds the old ones too, because the store only drops ids in [`Published::set_certs`]
    /// after no published table names them. Panics in debug builds if the order would be broken.
    pub fn publish(&self, certs: Arc<CertStore>, generation: Arc<Generation>) {
        debug_assert!(
            generation.table.cert_ids().iter().all(|id| certs.contains(id)),
            "publishing a table whose certificates are not in the store"
        );
        self.certs.store(certs);
        self.generation.store(generation);
    }

    /// Replaces the certificate store without touching the table: used to drop certificates that no
    /// remembered generation names. The caller keeps every id of the serving table.
    pub fn set_certs(&self, certs: Arc<CertStore>) {
        debug_assert!(self.generation.load().table.cert_ids().iter().all(|id| certs.contains(id)));
        self.certs.store(certs);
    }

    pub fn generation(&self) -> &ArcSwap<Generation> {
        &self.generation
    }

    pub fn certs(&self) -> &ArcSwap<CertStore> {
        &self.certs
    }

    pub fn current(&self) -> Arc<Generation> {
        self.generation.load_full()
    }
}
