// MEGATRON_API marks what the shared library exports: the classes and functions declared under
// include/megatron. The library is built with hidden visibility, so the rest (src/) stays inside.
#pragma once

#define MEGATRON_API __attribute__((visibility("default")))
