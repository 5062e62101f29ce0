//! [`MemoryDirectory`]: an in-memory [`Directory`] that keeps the durability contract to the
//! letter, so tests can crash it and inject faults at any call.
//!
//! It tracks two states: what readers see now, and what a crash would leave. File contents
//! become durable at [`FileWriter::sync`]; names (creates, renames, removes) at
//! [`Directory::sync_dir`]. [`MemoryDirectory::crash`] throws away everything not durable,
//! leaving an unsynced file empty or with a prefix of its bytes (a torn write), as a real
//! crash may. Faults are planned per call: the n-th call of the directory (every method,
//! every `write` of a writer) can fail with an I/O error (ENOSPC, EIO, …) or be the point
//! where the process "crashes": that call and every later one fail until [`MemoryDirectory::crash`]
//! is applied, as if the process had died there.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use strata_engine::format::SegmentBytes;

use super::{Directory, FileWriter};

/// What happens at a planned call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this I/O error kind and changes nothing.
    Error(io::ErrorKind),
    /// The process dies at this call: it and every later call fail (with `Other`) until the
    /// directory is [crashed](MemoryDirectory::crash).
    Crash,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    /// What readers see.
    data: Vec<u8>,
    /// What survives a crash (the bytes at the last sync).
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    /// Names readers see.
    names: BTreeMap<String, u64>,
    /// Names that survive a crash (as of the last directory sync).
    durable_names: BTreeMap<String, u64>,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    /// Calls made so far (the next call has this number).
    calls: u64,
    planned: BTreeMap<u64, Fault>,
    /// Whether the process has "died" (a planned crash was reached).
    dead: bool,
    /// Faults (errors and crashes) delivered.
    delivered: u64,
}

impl State {
    /// Counts a call and returns the fault it meets, if any.
    fn call(&mut self) -> io::Result<()> {
        let number = self.calls;
        self.calls += 1;
        if self.dead {
            return Err(io::Error::other("the process crashed"));
        }
        match self.planned.remove(&number) {
            None => Ok(()),
            Some(Fault::Error(kind)) => {
                self.delivered += 1;
                Err(io::Error::from(kind))
            }
            Some(Fault::Crash) => {
                self.delivered += 1;
                self.dead = true;
                Err(io::Error::other("the process crashed"))
            }
        }
    }

    fn inode_of(&self, name: &str) -> io::Result<u64> {
        self.names.get(name).copied().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

/// An in-memory, fault-injecting directory (see the module docs). Clones share the same files.
#[derive(Debug, Clone, Default)]
pub struct MemoryDirectory {
    state: Arc<Mutex<State>>,
}

impl MemoryDirectory {
    /// An empty directory without planned faults.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Plans `fault` at call number `call` (calls are numbered from 0 since the directory was
    /// made; see [`MemoryDirectory::calls`]).
    pub fn plan(&self, call: u64, fault: Fault) {
        self.lock().planned.insert(call, fault);
    }

    /// Removes every planned fault not delivered yet.
    pub fn clear_plan(&self) {
        self.lock().planned.clear();
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// Faults delivered so far.
    pub fn delivered(&self) -> u64 {
        self.lock().delivered
    }

    /// Whether a planned crash has been reached (every call fails until [`Self::crash`]).
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// Simulates a crash and restart: names revert to the last directory sync, and each file's
    /// contents to its last sync, except that a file written since keeps the prefix of its
    /// unsynced bytes that `torn(name, unsynced_len)` chooses (0: none; the durable bytes are
    /// kept when they are longer). Undelivered planned faults are dropped.
    pub fn crash(&self, mut torn: impl FnMut(&str, usize) -> usize) {
        let mut state = self.lock();
        let state = &mut *state;
        state.names = state.durable_names.clone();
        let live: std::collections::HashSet<u64> = state.names.values().copied().collect();
        state.inodes.retain(|id, _| live.contains(id));
        for (name, id) in &state.names {
            let inode = state.inodes.get_mut(id).expect("a named inode exists");
            if inode.data != inode.durable {
                let keep = torn(name, inode.data.len()).min(inode.data.len());
                inode.data =
                    if keep > inode.durable.len() { inode.data[..keep].to_vec() } else { inode.durable.clone() };
                inode.durable.clone_from(&inode.data);
            }
        }
        state.dead = false;
        state.planned.clear();
    }

    /// The bytes of `name` as readers see them now (for tests).
    pub fn read(&self, name: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        let id = state.names.get(name)?;
        Some(state.inodes[id].data.clone())
    }
}

struct MemoryWriter {
    state: Arc<Mutex<State>>,
    inode: u64,
}

impl MemoryWriter {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Write for MemoryWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut state = self.lock();
        state.call()?;
        if let Some(inode) = state.inodes.get_mut(&self.inode) {
            inode.data.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl FileWriter for MemoryWriter {
    fn sync(&mut self) -> io::Result<()> {
        let mut state = self.lock();
        state.call()?;
        if let Some(inode) = state.inodes.get_mut(&self.inode) {
            inode.durable.clone_from(&inode.data);
        }
        Ok(())
    }
}

impl Directory for MemoryDirectory {
    fn create(&self, name: &str) -> io::Result<Box<dyn FileWriter>> {
        let mut state = self.lock();
        state.call()?;
        let inode = state.next_inode;
        state.next_inode += 1;
        state.inodes.insert(inode, Inode::default());
        if let Some(old) = state.names.insert(name.to_owned(), inode) {
            if !state.durable_names.values().any(|&id| id == old) {
                state.inodes.remove(&old);
            }
        }
        Ok(Box::new(MemoryWriter { state: Arc::clone(&self.state), inode }))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.call()?;
        let inode = state.inode_of(from)?;
        state.names.remove(from);
        state.names.insert(to.to_owned(), inode);
        Ok(())
    }

    fn sync_dir(&self, _renamed: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.call()?;
        state.durable_names = state.names.clone();
        let named: std::collections::HashSet<u64> = state.names.values().copied().collect();
        // Files no name refers to any more are gone for good (a writer still holding one
        // writes into nothing).
        state.inodes.retain(|id, _| named.contains(id));
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut state = self.lock();
        state.call()?;
        Ok(state.names.keys().cloned().collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.call()?;
        state.inode_of(name)?;
        state.names.remove(name);
        Ok(())
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        let mut state = self.lock();
        state.call()?;
        Ok(state.names.contains_key(name))
    }

    fn open_read(&self, name: &str) -> io::Result<SegmentBytes> {
        let mut state = self.lock();
        state.call()?;
        let inode = state.inode_of(name)?;
        Ok(SegmentBytes::copy_from(&state.inodes[&inode].data))
    }

    fn file_len(&self, name: &str) -> io::Result<u64> {
        let mut state = self.lock();
        state.call()?;
        let inode = state.inode_of(name)?;
        Ok(state.inodes[&inode].data.len() as u64)
    }

    fn describe(&self, name: &str) -> String {
        format!("memory:{name}")
    }
}
