#pragma once
// Polymorphic SDK types and exceptions must have one identity (typeinfo, vtable) in the
// host and in every plugin, even though plugins build with -fvisibility=hidden; otherwise
// `catch (const RetryableError&)` in the host would not match a plugin's throw.
#define OUTBOX_SDK_VISIBLE __attribute__((visibility("default")))
