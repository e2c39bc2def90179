// The one explicit instantiation of each template listed in json_instances.inc; every other
// object that includes <nlohmann/json.hpp> through common/json_extern/ declares them extern.
#include <nlohmann/json.hpp>

#define X(...) template __VA_ARGS__;
#include "common/json_instances.inc"
#undef X
