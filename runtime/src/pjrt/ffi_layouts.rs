//! The PJRT C API structs `ffi` declares by hand lie as the 0.81 header
//! lays them out: checked when the crate compiles, so a struct that drifts
//! from the header is a build error, never a call that passes PJRT a
//! field at the wrong offset. The sizes are those PJRT's header computes
//! with PJRT_STRUCT_SIZE (offset of the last field plus its size); ours may
//! only exceed them by trailing padding.

use super::ffi::*;
use std::mem::{offset_of, size_of};

const _: () = assert!(size_of::<PJRT_Client_Create_Args>() == 88);
const _: () = assert!(offset_of!(PJRT_Client_Create_Args, create_options) == 16);
const _: () = assert!(offset_of!(PJRT_Client_Create_Args, num_options) == 24);
const _: () = assert!(offset_of!(PJRT_NamedValue, name) == 16);
const _: () = assert!(offset_of!(PJRT_NamedValue, type_) == 32);
const _: () = assert!(offset_of!(PJRT_NamedValue, int64_value) == 40);
const _: () = assert!(offset_of!(PJRT_NamedValue, value_size) == 48);
const _: () = assert!(size_of::<PJRT_NamedValue>() == 56);
const _: () = assert!(offset_of!(PJRT_Device_GetDescription_Args, device_description) == 24);
const _: () = assert!(size_of::<PJRT_Device_GetDescription_Args>() == 32);
const _: () = assert!(offset_of!(PJRT_DeviceDescription_Id_Args, id) == 24);
const _: () = assert!(size_of::<PJRT_DeviceDescription_Id_Args>() == 32);
const _: () = assert!(offset_of!(PJRT_Client_Create_Args, client) == 64);
const _: () = assert!(offset_of!(PJRT_Client_BufferFromHostBuffer_Args, dims) == 40);
const _: () = assert!(size_of::<PJRT_Client_BufferFromHostBuffer_Args>() == 120);
const _: () = assert!(size_of::<PJRT_ExecuteOptions>() == 112);
const _: () = assert!(size_of::<PJRT_LoadedExecutable_Execute_Args>() == 80);
const _: () = assert!(size_of::<PJRT_Buffer_ToHostBuffer_Args>() == 56);
const _: () = assert!(offset_of!(PJRT_Api, fns) == 40);
const _: () = assert!(
    offset_of!(
        PJRT_Executable_GetCompiledMemoryStats_Args,
        temp_size_in_bytes
    ) == 56
);
const _: () = assert!(size_of::<PJRT_Executable_GetCompiledMemoryStats_Args>() == 120);
const _: () = assert!(
    offset_of!(
        PJRT_Executable_Serialize_Args,
        serialized_executable_deleter
    ) == 48
);
const _: () = assert!(size_of::<PJRT_Executable_Serialize_Args>() == 56);
const _: () = assert!(offset_of!(PJRT_Executable_DeserializeAndLoad_Args, loaded_executable) == 40);
const _: () = assert!(size_of::<PJRT_Executable_DeserializeAndLoad_Args>() == 64);
