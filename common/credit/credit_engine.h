/*
 * Credit-based end-to-end flow control engine (static and dynamic modes of
 * "A New Credit-Based End-to-End Flow Control Protocol for High Performance
 * Interconnects", J. Prades, chapters 5-6).  C++ entry point; C callers use
 * rdrp_credit.h.
 *
 *   credit_config.h          modes, mailbox partition, validation, defaults, eq. 5.1/6.1
 *   credit_types.h           packet kinds, headers, control packets, counters
 *   credit_sender.h          sender side: credit counters, parked request/response
 *   credit_receiver.h        receiver side: thresholds, quotas, activity, stealing
 *   credit_threshold_fifo.h  per-sender FIFO of credit_slots + 1 thresholds
 *   credit_activity.h        high / medium / low / null activity lists
 *   credit_slot_table.h      data-region slots in use and their senders
 *   credit_endpoint.h        one process: both sides + control queue (start here)
 *   credit_memory.h          bytes of engine state, for sizing and Table 7.1
 */
#ifndef RDRP_CREDIT_ENGINE_H
#define RDRP_CREDIT_ENGINE_H

#include "credit_activity.h"
#include "credit_config.h"
#include "credit_endpoint.h"
#include "credit_memory.h"
#include "credit_receiver.h"
#include "credit_sender.h"
#include "credit_slot_table.h"
#include "credit_threshold_fifo.h"
#include "credit_types.h"

#endif  // RDRP_CREDIT_ENGINE_H
