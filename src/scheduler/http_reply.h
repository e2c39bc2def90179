// What a handler answers: the HTTP status and a JSON body. Handlers are pure functions of the
// request body and the scheduler state; the server only copies this onto the wire.
#ifndef HAMI_SCHEDULER_HTTP_REPLY_H_
#define HAMI_SCHEDULER_HTTP_REPLY_H_

#include <string>

namespace hami::scheduler {

struct HttpReply {
  int status = 200;
  std::string body{};
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_HTTP_REPLY_H_
