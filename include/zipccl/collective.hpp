// zipccl: umbrella header for the host collectives and transports.
#pragma once

#include "collective/all_gather.hpp"
#include "collective/all_reduce.hpp"
#include "collective/all_to_all.hpp"
#include "collective/calibrate.hpp"
#include "collective/common.hpp"
#include "collective/reduce_scatter.hpp"
#include "collective/send_recv.hpp"
#include "collective/spill_budget.hpp"
#include "transport/local.hpp"
#include "transport/transport.hpp"
