#pragma once
// Protobuf's own log lines, routed into the server's log (common/logging.h)
// and rate-limited. A client can make protobuf log: each request message
// with a string field that is not valid UTF-8 writes an error line as it is
// refused. Left to protobuf, every such message would put a line on
// standard error, in protobuf's format, as fast as a client sends them.
//
// Threading: install once, at start, before any message is parsed
// (protobuf's handler is a process-wide pointer it reads unlocked); the
// handler itself may run on any thread.

namespace infergate {

// From now on protobuf's lines go to the server's log as warnings ("protobuf:
// ..."; its informational lines at debug level), at most one a second, with
// the count of those held back.
void RouteProtobufLogsToServerLog();

}  // namespace infergate
