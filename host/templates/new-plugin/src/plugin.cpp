// The plugin's entry point: the manifest names the handler, so outboxd constructs it once
// with its own config section.
#include "handler.hpp"

OUTBOX_PLUGIN(@TARGET@_plugin::@CLASS@, "@NAME@");
