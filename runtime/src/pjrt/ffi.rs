//! The slice of the PJRT C API (pjrt_c_api.h, API 0.81) that hlatc calls,
//! declared by hand. Every struct mirrors the C layout field for field
//! (`#[repr(C)]`); `struct_size` is set to our `size_of`, which PJRT accepts
//! when it is at least the size its header expects.
//!
//! The `pjrt` crate (API 0.54) cannot be used: the 0.81 plugin rejects its
//! `PJRT_Client_Create_Args` ("expected 88, got 72").

#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void};

pub type PJRT_Error = c_void;
pub type PJRT_Client = c_void;
pub type PJRT_Device = c_void;
pub type PJRT_Buffer = c_void;
pub type PJRT_Event = c_void;
pub type PJRT_LoadedExecutable = c_void;
pub type PJRT_Executable = c_void;
pub type PJRT_DeviceDescription = c_void;

/// Every PJRT entry point takes one args struct and returns an error or null.
pub type ApiFn = Option<unsafe extern "C" fn(args: *mut c_void) -> *mut PJRT_Error>;

#[repr(C)]
pub struct PJRT_Api_Version {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// Positions of the entry points in `PJRT_Api`, after the version header.
/// Only ever appended to upstream, so older plugins have a prefix of these.
pub mod slot {
    pub const ERROR_DESTROY: usize = 0;
    pub const ERROR_MESSAGE: usize = 1;
    pub const ERROR_GET_CODE: usize = 2;
    pub const PLUGIN_INITIALIZE: usize = 3;
    pub const EVENT_DESTROY: usize = 5;
    pub const EVENT_AWAIT: usize = 8;
    pub const CLIENT_CREATE: usize = 10;
    pub const CLIENT_DESTROY: usize = 11;
    pub const CLIENT_PLATFORM_NAME: usize = 12;
    pub const CLIENT_ADDRESSABLE_DEVICES: usize = 16;
    pub const CLIENT_COMPILE: usize = 20;
    pub const CLIENT_BUFFER_FROM_HOST_BUFFER: usize = 22;
    pub const DEVICE_DESCRIPTION_ID: usize = 23;
    pub const DEVICE_GET_DESCRIPTION: usize = 29;
    pub const EXECUTABLE_DESTROY: usize = 40;
    pub const EXECUTABLE_NUM_OUTPUTS: usize = 44;
    pub const EXECUTABLE_SERIALIZE: usize = 49;
    pub const LOADED_EXECUTABLE_DESTROY: usize = 50;
    pub const LOADED_EXECUTABLE_GET_EXECUTABLE: usize = 51;
    pub const LOADED_EXECUTABLE_EXECUTE: usize = 55;
    pub const EXECUTABLE_DESERIALIZE_AND_LOAD: usize = 56;
    pub const BUFFER_DESTROY: usize = 58;
    pub const BUFFER_ELEMENT_TYPE: usize = 59;
    pub const BUFFER_DIMENSIONS: usize = 60;
    pub const BUFFER_TO_HOST_BUFFER: usize = 70;
    pub const EXECUTABLE_GET_COMPILED_MEMORY_STATS: usize = 96;
    /// One past the highest slot used.
    pub const COUNT: usize = 97;
}

#[repr(C)]
pub struct PJRT_Api {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub pjrt_api_version: PJRT_Api_Version,
    pub fns: [ApiFn; slot::COUNT],
}

/// Declares an args struct whose first two fields are the usual
/// `struct_size` / `extension_start` header, with `new()` zero-filling the rest.
macro_rules! args_struct {
    ($name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        #[repr(C)]
        pub struct $name {
            pub struct_size: usize,
            pub extension_start: *mut c_void,
            $(pub $field: $ty,)*
        }
        impl $name {
            pub fn new() -> Self {
                // SAFETY: every field is an integer, a raw pointer or an
                // Option of a function pointer; all-zero is valid for each
                // (0 / null / None), which is what PJRT expects for unset.
                let mut s: Self = unsafe { std::mem::zeroed() };
                s.struct_size = std::mem::size_of::<Self>();
                s
            }
        }
    };
}

args_struct!(PJRT_Error_Destroy_Args { error: *mut PJRT_Error });
args_struct!(PJRT_Error_Message_Args {
    error: *const PJRT_Error,
    message: *const c_char,
    message_size: usize,
});
args_struct!(PJRT_Error_GetCode_Args {
    error: *const PJRT_Error,
    code: c_int,
});
args_struct!(PJRT_Plugin_Initialize_Args {});
args_struct!(PJRT_Event_Destroy_Args { event: *mut PJRT_Event });
args_struct!(PJRT_Event_Await_Args { event: *mut PJRT_Event });
args_struct!(PJRT_NamedValue {
    name: *const c_char,
    name_size: usize,
    type_: c_int,
    // A union of `const char*`, `int64_t`, `const int64_t*`, `float` and
    // `bool`: eight bytes, eight-aligned. hlatc passes int64 values only.
    int64_value: i64,
    value_size: usize,
});
args_struct!(PJRT_Client_Create_Args {
    create_options: *const PJRT_NamedValue,
    num_options: usize,
    kv_get_callback: *mut c_void,
    kv_get_user_arg: *mut c_void,
    kv_put_callback: *mut c_void,
    kv_put_user_arg: *mut c_void,
    client: *mut PJRT_Client,
    kv_try_get_callback: *mut c_void,
    kv_try_get_user_arg: *mut c_void,
});
args_struct!(PJRT_Client_Destroy_Args { client: *mut PJRT_Client });
args_struct!(PJRT_Client_PlatformName_Args {
    client: *mut PJRT_Client,
    platform_name: *const c_char,
    platform_name_size: usize,
});
args_struct!(PJRT_Client_AddressableDevices_Args {
    client: *mut PJRT_Client,
    addressable_devices: *const *mut PJRT_Device,
    num_addressable_devices: usize,
});
args_struct!(PJRT_Device_GetDescription_Args {
    device: *mut PJRT_Device,
    device_description: *mut PJRT_DeviceDescription,
});
args_struct!(PJRT_DeviceDescription_Id_Args {
    device_description: *mut PJRT_DeviceDescription,
    id: c_int,
});
args_struct!(PJRT_Program {
    code: *mut c_char,
    code_size: usize,
    format: *const c_char,
    format_size: usize,
});
args_struct!(PJRT_Client_Compile_Args {
    client: *mut PJRT_Client,
    program: *const PJRT_Program,
    compile_options: *const c_char,
    compile_options_size: usize,
    executable: *mut PJRT_LoadedExecutable,
});
args_struct!(PJRT_Client_BufferFromHostBuffer_Args {
    client: *mut PJRT_Client,
    data: *const c_void,
    type_: c_int,
    dims: *const i64,
    num_dims: usize,
    byte_strides: *const i64,
    num_byte_strides: usize,
    host_buffer_semantics: c_int,
    device: *mut PJRT_Device,
    memory: *mut c_void,
    device_layout: *mut c_void,
    done_with_host_buffer: *mut PJRT_Event,
    buffer: *mut PJRT_Buffer,
});
args_struct!(PJRT_Executable_Destroy_Args { executable: *mut PJRT_Executable });
args_struct!(PJRT_Executable_NumOutputs_Args {
    executable: *mut PJRT_Executable,
    num_outputs: usize,
});
args_struct!(PJRT_Executable_GetCompiledMemoryStats_Args {
    executable: *mut PJRT_Executable,
    generated_code_size_in_bytes: i64,
    argument_size_in_bytes: i64,
    output_size_in_bytes: i64,
    alias_size_in_bytes: i64,
    temp_size_in_bytes: i64,
    host_generated_code_size_in_bytes: i64,
    host_argument_size_in_bytes: i64,
    host_output_size_in_bytes: i64,
    host_alias_size_in_bytes: i64,
    host_temp_size_in_bytes: i64,
    peak_memory_in_bytes: i64,
    total_size_in_bytes: i64,
});
args_struct!(PJRT_Executable_Serialize_Args {
    executable: *const PJRT_Executable,
    // Owned by `serialized_executable`, valid until its deleter runs.
    serialized_bytes: *const c_char,
    serialized_bytes_size: usize,
    serialized_executable: *mut c_void,
    serialized_executable_deleter: Option<unsafe extern "C" fn(exec: *mut c_void)>,
});
args_struct!(PJRT_Executable_DeserializeAndLoad_Args {
    client: *mut PJRT_Client,
    serialized_executable: *const c_char,
    serialized_executable_size: usize,
    loaded_executable: *mut PJRT_LoadedExecutable,
    // A serialized CompileOptionsProto, or null for the serialized ones.
    overridden_serialized_compile_options: *const c_char,
    overridden_serialized_compile_options_size: usize,
});
args_struct!(PJRT_LoadedExecutable_Destroy_Args { executable: *mut PJRT_LoadedExecutable });
args_struct!(PJRT_LoadedExecutable_GetExecutable_Args {
    loaded_executable: *mut PJRT_LoadedExecutable,
    executable: *mut PJRT_Executable,
});
args_struct!(PJRT_ExecuteOptions {
    send_callbacks: *mut c_void,
    recv_callbacks: *mut c_void,
    num_send_ops: usize,
    num_recv_ops: usize,
    launch_id: c_int,
    non_donatable_input_indices: *const i64,
    num_non_donatable_input_indices: usize,
    context: *mut c_void,
    call_location: *const c_char,
    num_tasks: usize,
    task_ids: *mut c_int,
    incarnation_ids: *mut i64,
});
args_struct!(PJRT_LoadedExecutable_Execute_Args {
    executable: *mut PJRT_LoadedExecutable,
    options: *mut PJRT_ExecuteOptions,
    argument_lists: *const *const *mut PJRT_Buffer,
    num_devices: usize,
    num_args: usize,
    output_lists: *const *mut *mut PJRT_Buffer,
    device_complete_events: *mut *mut PJRT_Event,
    execute_device: *mut PJRT_Device,
});
args_struct!(PJRT_Buffer_Destroy_Args { buffer: *mut PJRT_Buffer });
args_struct!(PJRT_Buffer_ElementType_Args {
    buffer: *mut PJRT_Buffer,
    type_: c_int,
});
args_struct!(PJRT_Buffer_Dimensions_Args {
    buffer: *mut PJRT_Buffer,
    dims: *const i64,
    num_dims: usize,
});
args_struct!(PJRT_Buffer_ToHostBuffer_Args {
    src: *mut PJRT_Buffer,
    host_layout: *mut c_void,
    dst: *mut c_void,
    dst_size: usize,
    event: *mut PJRT_Event,
});

/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: PJRT copies the host
/// data before `BufferFromHostBuffer` returns.
pub const HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: c_int = 0;

/// `PJRT_NamedValue_kInt64`: the value is `int64_value`, `value_size` 1.
pub const NAMED_VALUE_INT64: c_int = 1;
