// The plugin's logging (lmx_set_log_callback): every line the engine writes through
// lmx::logger() goes to the host's log callback or, until the host sets one, to standard error at
// warning level and above. Never to standard output, which belongs to the host.
#pragma once

#include <cstdint>

#include "plugin/include/lmx/plugin.h"

namespace lmx::plugin {

// Makes the plugin's logger lmx::logger() for this library. Done once when the library is
// loaded; idempotent.
void install_plugin_logger();

// lmx_set_log_callback. `callback` NULL: standard error. Waits for calls of the previous
// callback in progress on other threads, so that it is never called again once this returns.
// Throws lmx::Error naming the level when it is outside LMX_LOG_TRACE..LMX_LOG_OFF.
void set_log_callback(lmx_log_callback callback, void* user_data, int32_t min_level);

// True while this thread runs the host's log callback.
bool in_log_callback();

}  // namespace lmx::plugin
