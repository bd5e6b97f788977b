//! Safe owners of PJRT objects. Every raw pointer is owned by exactly one
//! Rust value and destroyed once in `Drop`; the plugin library is kept alive
//! (through `Arc`) for as long as any object created by it exists.

use super::ffi::{self, slot, ApiFn};
use hlatc_compiler::{ElementType, Literal};
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// What tells one plugin file from another without reading its 260 MB:
/// its size and modification time (to the nanosecond where the file
/// system keeps them). A file rewritten, or another put at the same path,
/// reads differently.
pub(crate) fn file_identity(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let modified = m
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(format!(
        "size={} mtime={}.{:09}",
        m.len(),
        modified.as_secs(),
        modified.subsec_nanos()
    ))
}

/// A failed PJRT call, with the plugin's own message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PjrtError {
    #[error("cannot load PJRT plugin {path}: {message}")]
    Load { path: PathBuf, message: String },
    /// The file is no whole shared library, found before `dlopen` could
    /// crash on it.
    #[error("cannot load PJRT plugin {path}: {source}")]
    PluginFile {
        path: PathBuf,
        #[source]
        source: crate::plugin::PluginFileError,
    },
    #[error("PJRT plugin {path} has API {major}.{minor}; hlatc needs 0.{min_minor} or newer with the same major version")]
    Version {
        path: PathBuf,
        major: i32,
        minor: i32,
        min_minor: i32,
    },
    #[error("PJRT plugin lacks {0}")]
    MissingFunction(&'static str),
    #[error("cannot read the XLA flags PJRT plugin {path} defines: {source}")]
    Flags {
        path: PathBuf,
        #[source]
        source: crate::plugin_flags::PluginFlagsError,
    },
    /// XLA would abort the process on it when the client is created.
    #[error("XLA_FLAGS sets --{flag}, which PJRT plugin {path} (API {major}.{minor}) does not define: XLA would abort the process on it; take it out of XLA_FLAGS for this plugin")]
    UnknownXlaFlag {
        path: PathBuf,
        flag: String,
        major: i32,
        minor: i32,
    },
    #[error("{call} failed (code {code}): {message}")]
    Call {
        call: &'static str,
        code: i32,
        message: String,
    },
    /// PJRT answered a call with nothing where it must give something.
    #[error("PJRT returned {what}")]
    Null { what: &'static str },
    #[error("PJRT returned {requested} devices requested")]
    DeviceCount { requested: usize },
    #[error("PJRT returned no addressable devices")]
    NoDevices,
    #[error("PJRT returned device {device} of a client with {devices}")]
    NoSuchDevice { device: usize, devices: usize },
    #[error("PJRT returned unsupported output buffer type {type_code}")]
    BufferType { type_code: i64 },
    /// An output buffer whose bytes do not make the literal its type and
    /// dimensions say (the literal's error, in words: it is not `Clone`).
    #[error("PJRT returned {message}")]
    BufferBytes { message: String },
    #[error("PJRT returned {lists} argument lists for a client with {devices} device(s)")]
    ArgumentLists { lists: usize, devices: usize },
    #[error("PJRT returned argument lists of {first} and {other} buffers")]
    ArgumentCounts { first: usize, other: usize },
    /// A buffer on another device or client than its list's.
    #[error("argument {arg} of list {list} lives on device {device} (or another client's), not the list's")]
    ArgumentDevice {
        list: usize,
        arg: usize,
        device: usize,
    },
    /// PJRT takes one set of arguments to lend (not donate) for every device.
    #[error("argument list {list} donates other arguments than list 0; every device's list must donate the same")]
    Donations { list: usize },
}

/// The lowest API minor version whose structs match ours.
const MIN_MINOR: i32 = 81;

struct Plugin {
    // Never unloaded: the plugin registers process-exit handlers and
    // thread-local destructors (absl, its thread pools) that run after every
    // Rust owner is gone. `dlclose` before exit turns each of them into a
    // jump into unmapped memory (SIGSEGV at exit after any plugin error), so
    // the mapping must live as long as the process.
    _lib: std::mem::ManuallyDrop<libloading::Library>,
    api: *const ffi::PJRT_Api,
    path: PathBuf,
    /// The file's identity when it was loaded (see [`file_identity`]).
    identity: Option<String>,
    /// The compile options hlatc sets ([`crate::compile_options::OVERRIDES`])
    /// that this plugin does not define, so are left out of its compiles.
    options_left_out: Vec<&'static str>,
}

// SAFETY: `api` points at a static, immutable function table inside the
// loaded library, which `_lib` keeps mapped; PJRT's C API is documented as
// thread-safe for concurrent calls on distinct or shared clients.
unsafe impl Send for Plugin {}
// SAFETY: as above; the table is never written after `GetPjrtApi` returns.
unsafe impl Sync for Plugin {}

impl Plugin {
    fn load(path: &Path) -> Result<Plugin, PjrtError> {
        let load_err = |message: String| PjrtError::Load {
            path: path.to_path_buf(),
            message,
        };
        crate::plugin::check_plugin_file(path).map_err(|source| PjrtError::PluginFile {
            path: path.to_path_buf(),
            source,
        })?;
        // Read before it is loaded, so a file replaced later is not taken
        // for the one this process runs.
        let identity = file_identity(path);
        // SAFETY: loading a shared object runs its initializers. The path is
        // the PJRT plugin the user or the set-up script chose; nothing else
        // in the process depends on its symbols.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| load_err(e.to_string()))?;
        // From here on every path keeps the library mapped (see `Plugin::_lib`):
        // its initializers have run, so its exit handlers are registered.
        let lib = std::mem::ManuallyDrop::new(lib);
        // SAFETY: `GetPjrtApi` is the PJRT plugin entry point, declared in
        // pjrt_c_api.h as `const PJRT_Api* GetPjrtApi()`.
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const ffi::PJRT_Api> =
            unsafe { lib.get(b"GetPjrtApi\0") }
                .map_err(|e| load_err(format!("no GetPjrtApi symbol: {e}")))?;
        // SAFETY: calling the entry point has no preconditions.
        let api = unsafe { get() };
        if api.is_null() {
            return Err(load_err("GetPjrtApi returned null".into()));
        }
        // SAFETY: `api` is non-null and points at a PJRT_Api, whose header
        // (struct_size and version) is present in every API version.
        let (size, major, minor) = unsafe {
            let a = &*api;
            (
                a.struct_size,
                a.pjrt_api_version.major_version,
                a.pjrt_api_version.minor_version,
            )
        };
        if major != 0 || minor < MIN_MINOR {
            return Err(PjrtError::Version {
                path: path.to_path_buf(),
                major,
                minor,
                min_minor: MIN_MINOR,
            });
        }
        if size < std::mem::size_of::<ffi::PJRT_Api>() {
            return Err(load_err(format!(
                "PJRT_Api is {size} bytes, too small for the functions hlatc uses"
            )));
        }
        // Before anything in the plugin reads XLA_FLAGS (the client's
        // creation does).
        let flags =
            crate::plugin_flags::PluginFlags::read(path).map_err(|source| PjrtError::Flags {
                path: path.to_path_buf(),
                source,
            })?;
        if let Ok(set) = std::env::var("XLA_FLAGS") {
            let mut names = crate::xla_cpu_flags::settings(&set).map(|(name, _)| name);
            if let Some(flag) = names.find(|name| !flags.defines(name)) {
                return Err(PjrtError::UnknownXlaFlag {
                    path: path.to_path_buf(),
                    flag: flag.to_string(),
                    major,
                    minor,
                });
            }
        }
        let options_left_out = crate::compile_options::OVERRIDES
            .into_iter()
            .filter(|option| !flags.defines(option))
            .collect();
        let plugin = Plugin {
            _lib: lib,
            api,
            path: path.to_path_buf(),
            identity,
            options_left_out,
        };
        let mut args = ffi::PJRT_Plugin_Initialize_Args::new();
        plugin.call(slot::PLUGIN_INITIALIZE, "PJRT_Plugin_Initialize", &mut args)?;
        Ok(plugin)
    }

    fn function(
        &self,
        index: usize,
        name: &'static str,
    ) -> Result<unsafe extern "C" fn(*mut c_void) -> *mut c_void, PjrtError> {
        // SAFETY: `api` is valid (see `load`) and `index < slot::COUNT`, which
        // `load` checked lies inside the plugin's table.
        let f: ApiFn = unsafe { (*self.api).fns[index] };
        f.ok_or(PjrtError::MissingFunction(name))
    }

    /// Calls entry point `index` with `args`, turning a returned
    /// `PJRT_Error` into [`PjrtError::Call`] (and freeing it).
    fn call<T>(&self, index: usize, name: &'static str, args: &mut T) -> Result<(), PjrtError> {
        let f = self.function(index, name)?;
        // SAFETY: `T` is the `#[repr(C)]` args struct of entry point `index`
        // (each call site pairs them), initialised by `T::new()` with its
        // struct_size, and it outlives the call.
        let err = unsafe { f(args as *mut T as *mut c_void) };
        if err.is_null() {
            return Ok(());
        }
        Err(self.take_error(err, name))
    }

    fn take_error(&self, err: *mut c_void, call: &'static str) -> PjrtError {
        let mut msg = ffi::PJRT_Error_Message_Args::new();
        msg.error = err;
        let message = match self.function(slot::ERROR_MESSAGE, "PJRT_Error_Message") {
            Ok(f) => {
                // SAFETY: `err` is a live PJRT_Error returned by the plugin.
                unsafe { f(&mut msg as *mut _ as *mut c_void) };
                if msg.message.is_null() {
                    String::new()
                } else {
                    // SAFETY: PJRT returns a pointer/length pair valid until
                    // the error is destroyed, which happens below.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(msg.message as *const u8, msg.message_size)
                    };
                    String::from_utf8_lossy(bytes).into_owned()
                }
            }
            Err(_) => "(no PJRT_Error_Message)".into(),
        };
        let mut code = ffi::PJRT_Error_GetCode_Args::new();
        code.error = err;
        if let Ok(f) = self.function(slot::ERROR_GET_CODE, "PJRT_Error_GetCode") {
            // SAFETY: as above, `err` is live.
            unsafe { f(&mut code as *mut _ as *mut c_void) };
        }
        let mut destroy = ffi::PJRT_Error_Destroy_Args::new();
        destroy.error = err;
        if let Ok(f) = self.function(slot::ERROR_DESTROY, "PJRT_Error_Destroy") {
            // SAFETY: `err` is destroyed exactly once, here.
            unsafe { f(&mut destroy as *mut _ as *mut c_void) };
        }
        PjrtError::Call {
            call,
            code: code.code,
            message,
        }
    }

    /// The id of `device`, one of a live client's devices.
    fn device_id(&self, device: *mut c_void) -> Result<i64, PjrtError> {
        let mut g = ffi::PJRT_Device_GetDescription_Args::new();
        g.device = device;
        self.call(
            slot::DEVICE_GET_DESCRIPTION,
            "PJRT_Device_GetDescription",
            &mut g,
        )?;
        let mut a = ffi::PJRT_DeviceDescription_Id_Args::new();
        a.device_description = g.device_description;
        self.call(
            slot::DEVICE_DESCRIPTION_ID,
            "PJRT_DeviceDescription_Id",
            &mut a,
        )?;
        Ok(a.id.into())
    }

    fn await_and_destroy_event(
        &self,
        event: *mut c_void,
        what: &'static str,
    ) -> Result<(), PjrtError> {
        if event.is_null() {
            return Ok(());
        }
        let mut a = ffi::PJRT_Event_Await_Args::new();
        a.event = event;
        let r = self.call(slot::EVENT_AWAIT, what, &mut a);
        let mut d = ffi::PJRT_Event_Destroy_Args::new();
        d.event = event;
        let _ = self.call(slot::EVENT_DESTROY, "PJRT_Event_Destroy", &mut d);
        r
    }
}

struct ClientInner {
    plugin: Arc<Plugin>,
    client: *mut c_void,
    /// Every addressable device, ordered by id.
    devices: Vec<*mut c_void>,
    /// `devices`' ids, in the same order.
    device_ids: Vec<i64>,
    platform: String,
    /// Executions launched, for their launch ids.
    launches: AtomicI32,
}

// SAFETY: a PJRT_Client is thread-safe by the PJRT contract; the client
// pointer is owned here and destroyed once in Drop, and the device pointers
// are owned by that client, which outlives them.
unsafe impl Send for ClientInner {}
// SAFETY: see above.
unsafe impl Sync for ClientInner {}

impl ClientInner {
    /// A client of the plugin with `count` devices (the plugin's default
    /// with `None`), every device listed, by id.
    fn create(plugin: &Arc<Plugin>, count: Option<usize>) -> Result<ClientInner, PjrtError> {
        let name = CPU_DEVICE_COUNT.as_bytes();
        let mut option = ffi::PJRT_NamedValue::new();
        option.name = name.as_ptr() as *const _;
        option.name_size = name.len();
        option.type_ = ffi::NAMED_VALUE_INT64;
        option.value_size = 1;
        let mut c = ffi::PJRT_Client_Create_Args::new();
        if let Some(n) = count {
            option.int64_value =
                i64::try_from(n).map_err(|_| PjrtError::DeviceCount { requested: n })?;
            // The option, and the name it points at, outlive the call.
            c.create_options = &option;
            c.num_options = 1;
        }
        plugin.call(slot::CLIENT_CREATE, "PJRT_Client_Create", &mut c)?;
        if c.client.is_null() {
            return Err(PjrtError::Null {
                what: "a null client",
            });
        }
        let mut name = ffi::PJRT_Client_PlatformName_Args::new();
        name.client = c.client;
        let platform = match plugin.call(
            slot::CLIENT_PLATFORM_NAME,
            "PJRT_Client_PlatformName",
            &mut name,
        ) {
            // SAFETY: PJRT returns a pointer/length pair owned by the client.
            Ok(()) if !name.platform_name.is_null() => String::from_utf8_lossy(unsafe {
                std::slice::from_raw_parts(name.platform_name as *const u8, name.platform_name_size)
            })
            .into_owned(),
            _ => "unknown".into(),
        };
        let mut d = ffi::PJRT_Client_AddressableDevices_Args::new();
        d.client = c.client;
        // Owned from here on, so an error below still destroys the client.
        let mut inner = ClientInner {
            plugin: plugin.clone(),
            client: c.client,
            devices: Vec::new(),
            device_ids: Vec::new(),
            platform,
            launches: AtomicI32::new(0),
        };
        plugin.call(
            slot::CLIENT_ADDRESSABLE_DEVICES,
            "PJRT_Client_AddressableDevices",
            &mut d,
        )?;
        if d.num_addressable_devices == 0 || d.addressable_devices.is_null() {
            return Err(PjrtError::NoDevices);
        }
        // SAFETY: PJRT returned a non-null array of `num_addressable_devices`
        // device pointers owned by the client, which outlives every use
        // through `ClientInner`; they are copied out here.
        let devices =
            unsafe { std::slice::from_raw_parts(d.addressable_devices, d.num_addressable_devices) }
                .to_vec();
        let mut by_id = devices
            .into_iter()
            .map(|dev| Ok((plugin.device_id(dev)?, dev)))
            .collect::<Result<Vec<_>, PjrtError>>()?;
        by_id.sort_by_key(|&(id, _)| id);
        (inner.device_ids, inner.devices) = by_id.into_iter().unzip();
        Ok(inner)
    }

    /// A launch id of its own for each execution, so that the rendezvous
    /// keys of one run's collectives (XLA CPU takes the launch id for the
    /// run id) never match another's, and its logs tell runs apart.
    fn next_launch_id(&self) -> i32 {
        // Positive and wrapping: 0 is what a caller that sets none sends.
        (self.launches.fetch_add(1, Ordering::Relaxed) & i32::MAX).max(1)
    }
}

/// How many devices to ask the plugin for, to show `devices` of them.
///
/// XLA CPU makes each of its two thread pools (the one executions start
/// on, and the intra-op pool that runs their thunks and Eigen's parallel
/// kernels) `max(cores, device count)` threads (`GetPjRtCpuClient`). A
/// collective blocks the thread it runs on until every device has
/// arrived, and the thunk executor goes on running a device's program on
/// whichever pool thread finished its last kernel. So with as many
/// threads as devices, devices blocked in a collective can hold every
/// thread while another device's parallel dot waits for one to run its
/// kernels: no device moves, and XLA aborts the process after 40 s
/// ("Expected 2 threads to join the rendezvous, but only 1 of them
/// arrived on time"; `hlatc train --dp 2` of a 4-layer, 256-wide model on
/// a 2-core machine did, every time). A thread per device that may wait,
/// and the machine's cores besides for the work, rule that out; the
/// devices added are never used.
fn with_thread_reserve(devices: usize) -> usize {
    match devices {
        0 | 1 => devices,
        n => n + thread_reserve(),
    }
}

/// The pool threads kept free of collectives: the machine's cores.
fn thread_reserve() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_Client_Destroy_Args::new();
        a.client = self.client;
        let _ = self
            .plugin
            .call(slot::CLIENT_DESTROY, "PJRT_Client_Destroy", &mut a);
    }
}

/// The CPU plugin's client-create option for its number of devices
/// (`xla::GetXlaPjrtCpuClient`'s `cpu_device_count`).
const CPU_DEVICE_COUNT: &str = "cpu_device_count";

/// A PJRT client with its addressable devices.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl Client {
    /// Loads the plugin at `path` and creates a client with `device_count`
    /// devices (the CPU plugin's `cpu_device_count` create option), or as
    /// many as the plugin makes by default (four, for the CPU plugin
    /// 0.0.1) with `None`. The caller keeps the count positive and small:
    /// the plugin makes every device it is asked for.
    ///
    /// A client of several devices is made with more behind them, unseen
    /// ([`thread_reserve`]): XLA CPU sizes its thread pools by its device
    /// count, and a collective holds a pool thread per device while it
    /// waits for the others.
    pub fn load(path: &Path, device_count: Option<usize>) -> Result<Client, PjrtError> {
        let plugin = Arc::new(Plugin::load(path)?);
        if let Some(n) = device_count {
            if n == 0 || i64::try_from(n).is_err() {
                return Err(PjrtError::DeviceCount { requested: n });
            }
        }
        let mut inner = ClientInner::create(&plugin, device_count.map(with_thread_reserve))?;
        let shown = match device_count {
            Some(n) => n,
            None if inner.devices.len() > 1 => {
                let n = inner.devices.len();
                drop(inner);
                inner = ClientInner::create(&plugin, Some(with_thread_reserve(n)))?;
                n
            }
            None => 1,
        };
        if inner.devices.len() < shown {
            return Err(PjrtError::DeviceCount { requested: shown });
        }
        inner.devices.truncate(shown);
        inner.device_ids.truncate(shown);
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// The ids of the addressable devices, ascending.
    pub fn device_ids(&self) -> &[i64] {
        &self.inner.device_ids
    }

    pub fn platform_name(&self) -> &str {
        &self.inner.platform
    }

    pub fn plugin_path(&self) -> &Path {
        &self.inner.plugin.path
    }

    /// The plugin file's identity as it was when loaded (see
    /// [`file_identity`]), or `None` when it could not be read.
    pub fn plugin_identity(&self) -> Option<&str> {
        self.inner.plugin.identity.as_deref()
    }

    /// The compile options hlatc sets that the plugin does not define, and
    /// so are left out of every compile.
    pub fn options_left_out(&self) -> &[&'static str] {
        &self.inner.plugin.options_left_out
    }

    /// Compiles serialized `HloModuleProto` bytes with serialized
    /// `CompileOptionsProto` bytes.
    pub fn compile(
        &self,
        hlo_module_proto: &[u8],
        compile_options: &[u8],
    ) -> Result<LoadedExecutable, PjrtError> {
        let plugin = &self.inner.plugin;
        let format = b"hlo";
        let mut program = ffi::PJRT_Program::new();
        // PJRT takes `char*` but only reads the code for compilation.
        program.code = hlo_module_proto.as_ptr() as *mut _;
        program.code_size = hlo_module_proto.len();
        program.format = format.as_ptr() as *const _;
        program.format_size = format.len();
        let mut a = ffi::PJRT_Client_Compile_Args::new();
        a.client = self.inner.client;
        a.program = &program;
        a.compile_options = compile_options.as_ptr() as *const _;
        a.compile_options_size = compile_options.len();
        plugin.call(slot::CLIENT_COMPILE, "PJRT_Client_Compile", &mut a)?;
        if a.executable.is_null() {
            return Err(PjrtError::Null {
                what: "a null executable",
            });
        }
        let exe = LoadedExecutable {
            client: self.inner.clone(),
            exe: a.executable,
        };
        Ok(exe)
    }

    /// Loads an executable that [`LoadedExecutable::serialize`] wrote, in a
    /// process with the same plugin, for the devices `compile_options`
    /// (the options it was compiled with) name
    /// (`PJRT_Executable_DeserializeAndLoad`). The plugin trusts the bytes:
    /// the caller hands over only what a serialization of this plugin
    /// wrote, whole (the executable cache checks a checksum first).
    pub fn deserialize(
        &self,
        serialized: &[u8],
        compile_options: &[u8],
    ) -> Result<LoadedExecutable, PjrtError> {
        let mut a = ffi::PJRT_Executable_DeserializeAndLoad_Args::new();
        a.client = self.inner.client;
        // Both are only read, during the call.
        a.serialized_executable = serialized.as_ptr() as *const _;
        a.serialized_executable_size = serialized.len();
        a.overridden_serialized_compile_options = compile_options.as_ptr() as *const _;
        a.overridden_serialized_compile_options_size = compile_options.len();
        self.inner.plugin.call(
            slot::EXECUTABLE_DESERIALIZE_AND_LOAD,
            "PJRT_Executable_DeserializeAndLoad",
            &mut a,
        )?;
        if a.loaded_executable.is_null() {
            return Err(PjrtError::Null {
                what: "a null executable",
            });
        }
        Ok(LoadedExecutable {
            client: self.inner.clone(),
            exe: a.loaded_executable,
        })
    }

    /// Copies `lit` to the device at `device` (an index into the devices
    /// ordered by id): a buffer that lives until it is dropped or donated
    /// to a run.
    pub fn buffer_from_literal(&self, lit: &Literal, device: usize) -> Result<Buffer, PjrtError> {
        let handle = *self
            .inner
            .devices
            .get(device)
            .ok_or(PjrtError::NoSuchDevice {
                device,
                devices: self.inner.devices.len(),
            })?;
        let plugin = &self.inner.plugin;
        let mut a = ffi::PJRT_Client_BufferFromHostBuffer_Args::new();
        a.client = self.inner.client;
        a.data = lit.bytes().as_ptr() as *const c_void;
        a.type_ = buffer_type(lit.ty());
        a.dims = lit.dims().as_ptr();
        a.num_dims = lit.dims().len();
        // PJRT copies the bytes before the call returns: `lit` may go.
        a.host_buffer_semantics = ffi::HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL;
        a.device = handle;
        plugin.call(
            slot::CLIENT_BUFFER_FROM_HOST_BUFFER,
            "PJRT_Client_BufferFromHostBuffer",
            &mut a,
        )?;
        if a.buffer.is_null() {
            return Err(PjrtError::Null {
                what: "a null buffer",
            });
        }
        let buffer = Buffer {
            client: self.inner.clone(),
            buf: a.buffer,
            device,
        };
        plugin.await_and_destroy_event(
            a.done_with_host_buffer,
            "PJRT_Event_Await (host to device)",
        )?;
        Ok(buffer)
    }
}

/// An array on one of a client's devices, owned: destroyed when dropped,
/// or given up to a run that donates it ([`BufferArg::Donated`]), which
/// takes it by value so that nothing can read it afterwards.
pub struct Buffer {
    client: Arc<ClientInner>,
    buf: *mut c_void,
    /// The device's index among the client's, ordered by id.
    device: usize,
}

// SAFETY: a PJRT_Buffer may be used and destroyed from any thread (the
// PJRT C API is thread-safe); the handle is owned here alone and
// destroyed once, in Drop, while `client` keeps its client alive.
unsafe impl Send for Buffer {}
// SAFETY: `&Buffer` only reads the buffer (its type, dimensions and
// bytes), which PJRT allows from several threads at once.
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        // A donated buffer's handle is destroyed too: the run took its
        // memory, not the handle. A null one is an output PJRT never gave.
        if self.buf.is_null() {
            return;
        }
        let mut a = ffi::PJRT_Buffer_Destroy_Args::new();
        a.buffer = self.buf;
        let _ = self
            .client
            .plugin
            .call(slot::BUFFER_DESTROY, "PJRT_Buffer_Destroy", &mut a);
    }
}

impl Buffer {
    /// The device it lives on: an index into the client's devices ordered
    /// by id.
    pub fn device(&self) -> usize {
        self.device
    }

    /// Whether it belongs to the client `exe` runs on.
    pub fn is_of(&self, exe: &LoadedExecutable) -> bool {
        Arc::ptr_eq(&self.client, &exe.client)
    }

    /// Copies it to the host.
    pub fn to_literal(&self) -> Result<Literal, PjrtError> {
        let plugin = &self.client.plugin;
        let mut t = ffi::PJRT_Buffer_ElementType_Args::new();
        t.buffer = self.buf;
        plugin.call(slot::BUFFER_ELEMENT_TYPE, "PJRT_Buffer_ElementType", &mut t)?;
        let ty = element_type(t.type_).ok_or(PjrtError::BufferType {
            type_code: i64::from(t.type_),
        })?;
        let mut d = ffi::PJRT_Buffer_Dimensions_Args::new();
        d.buffer = self.buf;
        plugin.call(slot::BUFFER_DIMENSIONS, "PJRT_Buffer_Dimensions", &mut d)?;
        let dims: Vec<i64> = if d.num_dims == 0 {
            Vec::new()
        } else {
            // SAFETY: PJRT returns `num_dims` dimensions owned by the buffer,
            // which is alive for this borrow.
            unsafe { std::slice::from_raw_parts(d.dims, d.num_dims) }.to_vec()
        };
        let len = dims.iter().product::<i64>().max(0) as usize * ty.byte_size();
        let mut bytes = vec![0u8; len];
        let mut a = ffi::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.buf;
        a.dst = bytes.as_mut_ptr() as *mut c_void;
        a.dst_size = bytes.len();
        plugin.call(
            slot::BUFFER_TO_HOST_BUFFER,
            "PJRT_Buffer_ToHostBuffer",
            &mut a,
        )?;
        plugin.await_and_destroy_event(a.event, "PJRT_Event_Await (device to host)")?;
        Literal::from_bytes(ty, dims, bytes).map_err(|e| PjrtError::BufferBytes {
            message: e.to_string(),
        })
    }
}

/// One argument of a run: a buffer lent (the run reads it, and writes an
/// output that aliases it to a buffer of its own) or donated (the run may
/// write the output aliasing it in place; the buffer is gone afterwards,
/// which taking it by value makes the only possibility).
pub enum BufferArg<'a> {
    Borrowed(&'a Buffer),
    Donated(Buffer),
}

impl BufferArg<'_> {
    fn buffer(&self) -> &Buffer {
        match self {
            BufferArg::Borrowed(b) => b,
            BufferArg::Donated(b) => b,
        }
    }
}

/// A compiled program, ready to run on the client's device.
pub struct LoadedExecutable {
    client: Arc<ClientInner>,
    exe: *mut c_void,
}

// SAFETY: PJRT executables may be executed from any thread; the pointer is
// owned here and destroyed once in Drop.
unsafe impl Send for LoadedExecutable {}
// SAFETY: see above.
unsafe impl Sync for LoadedExecutable {}

impl Drop for LoadedExecutable {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_LoadedExecutable_Destroy_Args::new();
        a.executable = self.exe;
        let _ = self.client.plugin.call(
            slot::LOADED_EXECUTABLE_DESTROY,
            "PJRT_LoadedExecutable_Destroy",
            &mut a,
        );
    }
}

/// What XLA's buffer assignment reserved for one compiled program, in
/// bytes (`xla::CompiledMemoryStats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompiledMemoryStats {
    pub generated_code: i64,
    pub arguments: i64,
    pub outputs: i64,
    /// Argument bytes reused for outputs (donated buffers).
    pub alias: i64,
    /// Scratch for intermediate values: what activation checkpointing cuts.
    pub temp: i64,
}

impl LoadedExecutable {
    /// Calls `f` with the executable behind this loaded one, then releases it.
    fn with_executable<T>(
        &self,
        f: impl FnOnce(&Plugin, *mut c_void) -> Result<T, PjrtError>,
    ) -> Result<T, PjrtError> {
        let plugin = &self.client.plugin;
        let mut g = ffi::PJRT_LoadedExecutable_GetExecutable_Args::new();
        g.loaded_executable = self.exe;
        plugin.call(
            slot::LOADED_EXECUTABLE_GET_EXECUTABLE,
            "PJRT_LoadedExecutable_GetExecutable",
            &mut g,
        )?;
        let r = f(plugin, g.executable);
        let mut d = ffi::PJRT_Executable_Destroy_Args::new();
        d.executable = g.executable;
        let _ = plugin.call(slot::EXECUTABLE_DESTROY, "PJRT_Executable_Destroy", &mut d);
        r
    }

    pub fn num_outputs(&self) -> Result<usize, PjrtError> {
        self.with_executable(|plugin, exe| {
            let mut n = ffi::PJRT_Executable_NumOutputs_Args::new();
            n.executable = exe;
            plugin.call(
                slot::EXECUTABLE_NUM_OUTPUTS,
                "PJRT_Executable_NumOutputs",
                &mut n,
            )?;
            Ok(n.num_outputs)
        })
    }

    /// The plugin's serialization of the compiled program
    /// (`PJRT_Executable_Serialize`): what [`Client::deserialize`] loads
    /// back, in a process with the same plugin.
    pub fn serialize(&self) -> Result<Vec<u8>, PjrtError> {
        self.with_executable(|plugin, exe| {
            let mut s = ffi::PJRT_Executable_Serialize_Args::new();
            s.executable = exe;
            plugin.call(
                slot::EXECUTABLE_SERIALIZE,
                "PJRT_Executable_Serialize",
                &mut s,
            )?;
            let bytes = (!s.serialized_bytes.is_null()).then(|| {
                // SAFETY: PJRT returned a pointer/length pair backed by
                // `serialized_executable`, which is alive until its deleter
                // runs below; the bytes are copied out first.
                unsafe {
                    std::slice::from_raw_parts(
                        s.serialized_bytes as *const u8,
                        s.serialized_bytes_size,
                    )
                }
                .to_vec()
            });
            if let Some(deleter) = s.serialized_executable_deleter {
                if !s.serialized_executable.is_null() {
                    // SAFETY: the deleter and the object are the pair PJRT
                    // returned; it is called once, here, and nothing reads
                    // `serialized_bytes` after it.
                    unsafe { deleter(s.serialized_executable) };
                }
            }
            bytes.ok_or(PjrtError::Null {
                what: "a null serialized executable",
            })
        })
    }

    /// The memory XLA planned for the program when it compiled it.
    pub fn memory_stats(&self) -> Result<CompiledMemoryStats, PjrtError> {
        self.with_executable(|plugin, exe| {
            let mut s = ffi::PJRT_Executable_GetCompiledMemoryStats_Args::new();
            s.executable = exe;
            plugin.call(
                slot::EXECUTABLE_GET_COMPILED_MEMORY_STATS,
                "PJRT_Executable_GetCompiledMemoryStats",
                &mut s,
            )?;
            Ok(CompiledMemoryStats {
                generated_code: s.generated_code_size_in_bytes,
                arguments: s.argument_size_in_bytes,
                outputs: s.output_size_in_bytes,
                alias: s.alias_size_in_bytes,
                temp: s.temp_size_in_bytes,
            })
        })
    }

    /// The client it runs on, to make its argument buffers with.
    pub fn client(&self) -> Client {
        Client {
            inner: self.client.clone(),
        }
    }

    /// Runs once on the client's first `args.len()` devices (ordered by
    /// id), argument list `i` on device `i`, and gives one output list per
    /// device, each output on its list's device. The executable was
    /// compiled for exactly those devices in that order (replica `i` on
    /// device `i`), and the caller has checked every list against the
    /// program's parameters. Donated arguments are the run's: it may write
    /// the outputs aliasing them in place; borrowed ones are left as they
    /// were. Nothing is donated when the arguments are refused here, but
    /// they are dropped with the call either way.
    pub fn execute(&self, args: Vec<Vec<BufferArg<'_>>>) -> Result<Vec<Vec<Buffer>>, PjrtError> {
        let devices = self.client.devices.len();
        if args.is_empty() || args.len() > devices {
            return Err(PjrtError::ArgumentLists {
                lists: args.len(),
                devices,
            });
        }
        let num_args = args[0].len();
        if let Some(list) = args.iter().find(|l| l.len() != num_args) {
            return Err(PjrtError::ArgumentCounts {
                first: num_args,
                other: list.len(),
            });
        }
        for (device, list) in args.iter().enumerate() {
            for (arg, a) in list.iter().enumerate() {
                let b = a.buffer();
                if !Arc::ptr_eq(&b.client, &self.client) || b.device != device {
                    return Err(PjrtError::ArgumentDevice {
                        list: device,
                        arg,
                        device: b.device,
                    });
                }
            }
        }
        // PJRT takes one set of arguments not to donate for every device,
        // so every list must lend the same ones.
        let lent = |list: &[BufferArg<'_>]| -> Vec<i64> {
            (0..list.len() as i64)
                .filter(|&i| matches!(list[i as usize], BufferArg::Borrowed(_)))
                .collect()
        };
        let non_donatable = lent(&args[0]);
        if let Some(list) = args.iter().position(|l| lent(l) != non_donatable) {
            return Err(PjrtError::Donations { list });
        }
        let arg_ptrs: Vec<Vec<*mut c_void>> = args
            .iter()
            .map(|list| list.iter().map(|a| a.buffer().buf).collect())
            .collect();
        let arg_lists: Vec<*const *mut c_void> = arg_ptrs.iter().map(|l| l.as_ptr()).collect();
        let num_outputs = self.num_outputs()?;
        let mut out_ptrs: Vec<Vec<*mut c_void>> =
            vec![vec![std::ptr::null_mut(); num_outputs]; args.len()];
        let out_lists: Vec<*mut *mut c_void> =
            out_ptrs.iter_mut().map(|l| l.as_mut_ptr()).collect();
        let mut events: Vec<*mut c_void> = vec![std::ptr::null_mut(); args.len()];
        let mut options = ffi::PJRT_ExecuteOptions::new();
        options.launch_id = self.client.next_launch_id();
        // Every aliased parameter not named here is donated: its buffer
        // may become the output's, so only a buffer given up by value
        // (`BufferArg::Donated`) is left off the list.
        options.non_donatable_input_indices = non_donatable.as_ptr();
        options.num_non_donatable_input_indices = non_donatable.len();
        let mut a = ffi::PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = self.exe;
        a.options = &mut options;
        // One list per device, each of `num_args` buffers (and of
        // `num_outputs` slots for the results), all alive past the call.
        a.argument_lists = arg_lists.as_ptr();
        a.num_devices = args.len();
        a.num_args = num_args;
        a.output_lists = out_lists.as_ptr();
        a.device_complete_events = events.as_mut_ptr();
        let plugin = &self.client.plugin;
        plugin.call(
            slot::LOADED_EXECUTABLE_EXECUTE,
            "PJRT_LoadedExecutable_Execute",
            &mut a,
        )?;
        // Own the outputs first so they are freed even if a wait fails.
        let outputs: Vec<Vec<Buffer>> = out_ptrs
            .into_iter()
            .enumerate()
            .map(|(device, list)| {
                list.into_iter()
                    .map(|buf| Buffer {
                        client: self.client.clone(),
                        buf,
                        device,
                    })
                    .collect()
            })
            .collect();
        // Every event is waited on and destroyed, whichever fails.
        let waited: Vec<Result<(), PjrtError>> = events
            .into_iter()
            .map(|e| plugin.await_and_destroy_event(e, "PJRT_Event_Await (execution)"))
            .collect();
        waited.into_iter().collect::<Result<(), _>>()?;
        // The donated handles go only now: the run is over.
        drop(args);
        if outputs.iter().flatten().any(|b| b.buf.is_null()) {
            return Err(PjrtError::Null {
                what: "a null output buffer",
            });
        }
        Ok(outputs)
    }
}

/// `PJRT_Buffer_Type` numbering (differs from XLA's `PrimitiveType` for bf16).
fn buffer_type(t: ElementType) -> i32 {
    match t {
        ElementType::Pred => 1,
        ElementType::S8 => 2,
        ElementType::S16 => 3,
        ElementType::S32 => 4,
        ElementType::S64 => 5,
        ElementType::U8 => 6,
        ElementType::U16 => 7,
        ElementType::U32 => 8,
        ElementType::U64 => 9,
        ElementType::F16 => 10,
        ElementType::F32 => 11,
        ElementType::F64 => 12,
        ElementType::Bf16 => 13,
        ElementType::C64 => 14,
        ElementType::C128 => 15,
        ElementType::F8E5M2 => 16,
        ElementType::F8E4M3FN => 17,
        ElementType::F8E4M3B11FNUZ => 18,
        ElementType::F8E5M2FNUZ => 19,
        ElementType::F8E4M3FNUZ => 20,
        ElementType::S4 => 21,
        ElementType::U4 => 22,
        ElementType::S2 => 24,
        ElementType::U2 => 25,
        ElementType::F8E4M3 => 26,
        ElementType::F8E3M4 => 27,
        ElementType::F8E8M0FNU => 28,
        ElementType::F4E2M1FN => 29,
    }
}

fn element_type(t: i32) -> Option<ElementType> {
    ElementType::ALL.into_iter().find(|&e| buffer_type(e) == t)
}
