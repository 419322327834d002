//===- server.cpp - libtfm_server.so: the OpenAI API over a model ---------===//
//
// HTTP (cpp-httplib, a thread per connection from a bounded pool) in front
// of one engine thread that owns the session. Handlers parse and check a
// request, tokenize it and queue a Job; the engine admits queued jobs into
// free sequences (reusing a cached prefix), prefills one chunk of one
// prompt per iteration and decodes every sequence past its prompt in one
// batched step, handing each job its tokens; the handler turns tokens into
// text (stop strings, streaming) and answers. The runtime is reached only
// through tfm_server_api (server_bridge.h). docs/Serving.md is the user's
// side of this file.
//
// Sequences of the session: [0, ndec) decode, [ndec, nrun) prefill (in the
// order they came), [nrun, parallel) are free and keep the keys and values
// of their last prompt for a later one that starts with the same tokens.
//
//===----------------------------------------------------------------------===//
#include "server_bridge.h"
#include "tfm/tokenizer.h"

#include <httplib.h>
#include <jansson.h>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <poll.h>
#include <set>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

/// A jansson value released at scope exit.
struct Json {
  json_t *v = nullptr;
  Json() = default;
  explicit Json(json_t *v) : v(v) {}
  Json(const Json &) = delete;
  Json &operator=(const Json &) = delete;
  ~Json() { json_decref(v); }
  json_t *release() {
    json_t *r = v;
    v = nullptr;
    return r;
  }
};

std::string dump(json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
  std::string r = s ? s : "null";
  free(s);
  return r;
}

/// An error a request gets: an HTTP status and OpenAI's error object.
struct Failure {
  int status;
  std::string message, param, type;
};

Failure bad(std::string message, std::string param = "") {
  return {400, std::move(message), std::move(param), "invalid_request_error"};
}

void answer_error(httplib::Response &res, const Failure &f) {
  Json e(json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message",
                   f.message.c_str(), "type", f.type.c_str(), "param",
                   f.param.empty() ? json_null() : json_string(f.param.c_str()),
                   "code", json_null()));
  res.status = f.status;
  res.set_content(dump(e.v), "application/json");
}

/// A generated token and, when asked for, its log probability and the
/// most likely alternatives.
struct Token {
  int32_t id;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;
};

/// One generation request, shared by its handler and the engine.
struct Job {
  // Set by the handler before it is queued.
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int top_logprobs = -1; // -1: no log probabilities
  // Written by the engine, read by the handler (under mu).
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Token> tokens;
  bool done = false;
  std::string finish; // "stop", "length", or an engine error
  std::string error;
  int64_t reused = 0;
  // Set by the handler: a stop string was found, or the client left.
  std::atomic<bool> stop{false}, cancelled{false};
  // The engine's own.
  size_t computed = 0;
  uint64_t rng = 0;
};

struct Metrics {
  std::atomic<uint64_t> requests{0}, failed{0}, prompt_tokens{0}, generated{0},
      prefix_hits{0}, reused_tokens{0}, cancelled{0}, shared_prefixes{0};
};

/// The socket of the connection this thread serves (HttpServer), for a
/// handler to see whether its client is still there.
thread_local int t_socket = -1;

/// Whether the request this thread handles came as HTTP/1.0, which has no
/// chunked transfer encoding: a stream is then sent as it comes and the
/// connection closed at its end.
thread_local bool t_http10 = false;

/// Whether the peer of `fd` has closed its side (or the connection broke).
bool peer_gone(int fd) {
  if (fd < 0)
    return false;
  struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0)
    return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
    return true;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/// A connection's socket as cpp-httplib's Stream, with a deadline: the
/// whole of a request (its line, headers and body) must arrive within
/// `timeout` seconds, so that a client sending a byte a second is dropped
/// whatever part it is slow in.
class Connection final : public httplib::Stream {
public:
  Connection(int fd, int timeout) : fd(fd), timeout(timeout) {}

  void start_request() {
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  }

  bool is_readable() const override {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    return left > 0 && wait(POLLIN, (int)left);
  }
  bool is_writable() const override { return wait(POLLOUT, timeout * 1000); }

  ssize_t read(char *ptr, size_t size) override {
    if (!is_readable())
      return -1;
    ssize_t n;
    do
      n = recv(fd, ptr, size, 0);
    while (n < 0 && errno == EINTR);
    return n;
  }
  ssize_t write(const char *ptr, size_t size) override {
    if (!is_writable())
      return -1;
    ssize_t n;
    do
      n = send(fd, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string &ip, int &port) const override {
    address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string &ip, int &port) const override {
    address(getsockname, ip, port);
  }
  socket_t socket() const override { return fd; }

private:
  bool wait(short events, int ms) const {
    struct pollfd p = {fd, events, 0};
    int n;
    do
      n = poll(&p, 1, ms);
    while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & events);
  }
  template <typename F>
  void address(F get, std::string &ip, int &port) const {
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    char host[INET6_ADDRSTRLEN] = "";
    port = 0;
    if (get(fd, (struct sockaddr *)&a, &len) != 0)
      return;
    if (a.ss_family == AF_INET) {
      auto *in = (struct sockaddr_in *)&a;
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto *in6 = (struct sockaddr_in6 *)&a;
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      port = ntohs(in6->sin6_port);
    }
    ip = host;
  }

  int fd, timeout;
  std::chrono::steady_clock::time_point deadline;
};

/// cpp-httplib's server with its connections served through Connection:
/// requests on a kept-alive connection (waiting at most `timeout` for the
/// next), each with its deadline, and the socket visible to the handlers.
class HttpServer final : public httplib::Server {
public:
  int timeout = 10;

  /// cpp-httplib listens with a backlog of 5 connections. Past it, a burst
  /// of clients connecting at once (16 on a busy machine) got SYN cookies,
  /// and the kernel reset those whose request came in more than one segment
  /// (http.client sends a POST's body after its headers). Listening again on
  /// the bound socket sets the system's limit (somaxconn) instead.
  bool widen_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }

private:
  bool process_and_close_socket(socket_t sock) override {
    Connection conn(sock, timeout);
    t_socket = sock;
    bool ok = true;
    for (int count = 100; count > 0; --count) {
      // The next request, or an idle connection closed.
      bool ready = false;
      for (int waited = 0; waited < timeout * 1000 && !ready; waited += 100) {
        if (svr_sock_ == INVALID_SOCKET)
          break;
        struct pollfd p = {sock, POLLIN, 0};
        ready = poll(&p, 1, 100) > 0;
      }
      if (!ready)
        break;
      conn.start_request();
      bool closed = false;
      ok = process_request(conn, count == 1 || svr_sock_ == INVALID_SOCKET,
                           closed, nullptr);
      if (!ok || closed)
        break;
    }
    t_socket = -1;
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
  }
};

class Server;

/// The engine: the session, the sequences and the queue.
class Engine {
public:
  /// `decoder_start`: an encoder-decoder's first target token (-1: a
  /// decoder).
  Engine(const tfm_server_api *api, tfm_model *m, tfm_session *s, int parallel,
         int64_t ctx, int chunk, int queue_limit, int threads,
         std::set<int32_t> eog, Metrics &metrics, int32_t decoder_start)
      : api(api), session(s), parallel(parallel), ctx(ctx), chunk(chunk),
        queue_limit(queue_limit), threads(threads), vocab(api->model_vocab(m)),
        decoder_start(decoder_start), eog(std::move(eog)), metrics(metrics),
        jobs(parallel), held(parallel), reusable(parallel, 0),
        stamp(parallel, 0), last(parallel, 0),
        logits((size_t)parallel * vocab) {}

  void start() {
    thread = std::thread([this] { run(); });
  }

  /// Queues a job; false if the queue is full.
  bool submit(std::shared_ptr<Job> job) {
    std::lock_guard<std::mutex> lock(mu);
    // `parallel` running and `queue_limit` waiting, counted from their
    // submission to their end: a burst is judged the same however fast
    // the engine admits.
    if (outstanding >= parallel + queue_limit)
      return false;
    ++outstanding;
    queue.push_back(std::move(job));
    cv.notify_one();
    return true;
  }

  /// Wakes the engine (a job was cancelled or stopped).
  void poke() {
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_one();
  }

  /// Ends the engine once every job it holds is done.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu);
      ending = true;
      cv.notify_one();
    }
    if (thread.joinable())
      thread.join();
  }

  /// For /metrics: running, waiting, and the paged KV cache's blocks: held
  /// by sequences (running requests and the prompts kept for reuse), in
  /// the pools, and at most.
  void counts(int &running, int &waiting, int64_t &blocks, int64_t &pooled,
              int64_t &all) {
    std::lock_guard<std::mutex> lock(mu);
    running = shown_running;
    waiting = (int)queue.size();
    blocks = shown_blocks;
    pooled = shown_pooled;
    all = shown_limit;
  }

private:
  void run() {
    if (threads > 0)
      api->set_threads(threads);
    publish();
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] {
          return ending || !queue.empty() || nrun > 0 || cancellations();
        });
        if (ending && queue.empty() && nrun == 0)
          return;
        while (nrun < parallel && !queue.empty()) {
          std::shared_ptr<Job> job = std::move(queue.front());
          queue.pop_front();
          admit(std::move(job));
        }
      }
      drop_stopped();
      // /metrics shows the admitted requests before their first token goes
      // out, and their prompts' blocks before their second: a client that
      // has read two tokens sees its request running and its blocks held
      // (published once an iteration, they were the state before it).
      publish();
      prefill();
      publish();
      decode();
      publish();
    }
  }

  bool cancellations() {
    for (int i = 0; i < nrun; ++i)
      if (jobs[i]->cancelled || jobs[i]->stop)
        return true;
    return false;
  }

  void publish() {
    int64_t blocks, pooled, limit;
    api->session_kv_blocks(session, &blocks, &pooled, &limit);
    std::lock_guard<std::mutex> lock(mu);
    shown_running = nrun;
    shown_blocks = blocks;
    shown_pooled = pooled;
    shown_limit = limit;
  }

  void swap(int a, int b) {
    if (a == b)
      return;
    if (api->session_swap(session, a, b) != TFM_OK) {
      std::fprintf(stderr, "serve: error: %s\n", api->last_error());
      std::abort(); // indices are the engine's own: a bug
    }
    std::swap(jobs[a], jobs[b]);
    std::swap(held[a], held[b]);
    std::swap(reusable[a], reusable[b]);
    std::swap(stamp[a], stamp[b]);
    std::swap(last[a], last[b]);
  }

  /// The whole prompt chunks of sequence r that a new prompt may reuse:
  /// a free sequence's kept prompt, or the chunks a running request has
  /// prefilled so far (computed alone, they are what the new prompt's
  /// prefill would compute).
  int64_t reusable_of(int r) const {
    // An encoder-decoder's sequences hold targets, not prompts.
    if (decoder_start >= 0)
      return 0;
    if (r >= nrun)
      return reusable[r];
    return std::min<int64_t>((int64_t)jobs[r]->computed / chunk * chunk,
                             (int64_t)held[r].size());
  }

  /// Puts a job into a free sequence with the longest cached prefix of its
  /// prompt in whole chunks: a free sequence's kept prompt (else the least
  /// recently used free sequence), or, when a running request holds a
  /// longer one, that request's blocks, shared (tfm_session_share).
  void admit(std::shared_ptr<Job> job) {
    int best = nrun;
    int64_t best_keep = -1;
    for (int r = 0; r < parallel; ++r) {
      int64_t lcp = 0, limit = std::min<int64_t>(
                           reusable_of(r), (int64_t)job->prompt.size() - 1);
      while (lcp < limit && held[r][lcp] == job->prompt[lcp])
        ++lcp;
      int64_t keep = lcp / chunk * chunk;
      bool freeSeq = r >= nrun, bestFree = best >= nrun;
      if (keep > best_keep || (keep == best_keep && freeSeq &&
                               (!bestFree || stamp[r] < stamp[best]))) {
        best = r;
        best_keep = keep;
      }
    }
    int src = -1;
    if (best < nrun) {
      // A running request's prefix: into the least recently used free
      // sequence.
      src = best;
      best = nrun;
      for (int r = nrun + 1; r < parallel; ++r)
        if (stamp[r] < stamp[best])
          best = r;
    }
    swap(best, nrun);
    int seq = nrun++;
    if (src >= 0) {
      if (best_keep == 0 ||
          api->session_share(session, seq, src, best_keep) != TFM_OK) {
        api->session_truncate(session, seq, 0);
        best_keep = 0;
      } else {
        held[seq].assign(held[src].begin(), held[src].begin() + best_keep);
        metrics.shared_prefixes++;
      }
    } else if (api->session_truncate(session, seq, best_keep) != TFM_OK) {
      api->session_truncate(session, seq, 0);
      best_keep = 0;
    }
    held[seq].resize((size_t)best_keep);
    reusable[seq] = 0;
    stamp[seq] = ++clock;
    job->computed = (size_t)best_keep;
    job->reused = best_keep;
    job->rng = job->seed;
    if (best_keep > 0) {
      metrics.prefix_hits++;
      metrics.reused_tokens += (uint64_t)best_keep;
    }
    jobs[seq] = std::move(job);
  }

  /// Ends sequence i (its job is done): it goes to the free sequences.
  void release(int i) {
    // Only whole chunks of the prompt are reused (see admit): the blocks
    // past them go back to the pool.
    int64_t keep = reusable_of(i);
    if (i < ndec) {
      swap(i, ndec - 1);
      i = --ndec;
    }
    swap(i, nrun - 1);
    --nrun;
    reusable[nrun] = keep;
    if (api->session_truncate(session, nrun, reusable[nrun]) != TFM_OK)
      api->session_truncate(session, nrun, reusable[nrun] = 0);
    held[nrun].resize((size_t)reusable[nrun]);
    jobs[nrun].reset();
  }

  void end(Job &job, const char *finish, const std::string &error = "") {
    {
      std::lock_guard<std::mutex> lock(mu);
      --outstanding;
    }
    std::lock_guard<std::mutex> lock(job.mu);
    job.done = true;
    job.finish = finish;
    job.error = error;
    job.cv.notify_all();
  }

  void drop_stopped() {
    for (int i = nrun; i-- > 0;) {
      Job &job = *jobs[i];
      if (job.cancelled) {
        metrics.cancelled++;
        end(job, "cancelled");
        release(i);
      } else if (job.stop) {
        end(job, "stop");
        release(i);
      }
    }
  }

  /// The next chunk of the first prompt still prefilling (at ndec).
  void prefill() {
    if (ndec == nrun)
      return;
    int seq = ndec;
    Job &job = *jobs[seq];
    if (decoder_start >= 0) {
      // An encoder-decoder: the prompt is the source, encoded at once; the
      // target starts with the decoder's start token.
      float *row = logits.data();
      if (api->session_encode_seq(session, seq, job.prompt.data(),
                                  (int64_t)job.prompt.size()) != TFM_OK ||
          api->session_append(session, seq, &decoder_start, 1, row) != TFM_OK) {
        end(job, "error", api->last_error());
        release(seq);
        return;
      }
      held[seq].assign(1, decoder_start);
      job.computed = job.prompt.size();
      ++ndec;
      if (take(seq, row))
        release(seq);
      return;
    }
    size_t at = job.computed;
    size_t t = std::min<size_t>((size_t)chunk - at % (size_t)chunk,
                                job.prompt.size() - at);
    float *row = logits.data();
    if (api->session_append(session, seq, job.prompt.data() + at, (int64_t)t,
                            row) != TFM_OK) {
      end(job, "error", api->last_error());
      release(seq);
      return;
    }
    held[seq].insert(held[seq].end(), job.prompt.begin() + (long)at,
                     job.prompt.begin() + (long)(at + t));
    job.computed += t;
    if (job.computed < job.prompt.size())
      return;
    ++ndec; // its first token comes from the prompt's last logits
    if (take(seq, row))
      release(seq);
  }

  void decode() {
    if (ndec == 0)
      return;
    std::vector<int32_t> next((size_t)ndec);
    for (int i = 0; i < ndec; ++i)
      next[(size_t)i] = last[(size_t)i];
    if (api->session_decode(session, ndec, next.data(), logits.data()) !=
        TFM_OK) {
      std::string e = api->last_error();
      for (int i = ndec; i-- > 0;) {
        end(*jobs[i], "error", e);
        release(i);
      }
      return;
    }
    for (int i = 0; i < ndec; ++i)
      held[i].push_back(next[(size_t)i]);
    std::vector<int> finished;
    for (int i = 0; i < ndec; ++i)
      if (take(i, logits.data() + (size_t)i * vocab))
        finished.push_back(i);
    for (size_t k = finished.size(); k-- > 0;)
      release(finished[k]);
  }

  /// Samples sequence seq's next token from `row` and hands it to its
  /// job; true if the job is done.
  bool take(int seq, const float *row) {
    Job &job = *jobs[seq];
    Token tok = sample(job, row);
    bool is_eog = eog.count(tok.id) > 0;
    size_t made;
    {
      std::lock_guard<std::mutex> lock(job.mu);
      if (!is_eog)
        job.tokens.push_back(tok);
      made = job.tokens.size();
      job.cv.notify_all();
    }
    if (!is_eog)
      metrics.generated++;
    last[(size_t)seq] = tok.id;
    if (is_eog) {
      end(job, "stop");
      return true;
    }
    if ((int64_t)made >= job.max_tokens || (int64_t)held[seq].size() >= ctx) {
      end(job, "length");
      return true;
    }
    return false;
  }

  Token sample(Job &job, const float *row) {
    Token t{api->sample(row, vocab, job.temperature, job.top_k, job.top_p,
                        &job.rng),
            0.0f,
            {}};
    if (job.top_logprobs >= 0) {
      int64_t best = 0;
      for (int64_t i = 1; i < vocab; ++i)
        if (row[i] > row[best])
          best = i;
      double lse = 0.0;
      for (int64_t i = 0; i < vocab; ++i)
        lse += std::exp((double)(row[i] - row[best]));
      float norm = row[best] + (float)std::log(lse);
      t.logprob = row[t.id] - norm;
      std::vector<int32_t> ids((size_t)vocab);
      for (int64_t i = 0; i < vocab; ++i)
        ids[(size_t)i] = (int32_t)i;
      size_t n = std::min<size_t>((size_t)job.top_logprobs, ids.size());
      std::partial_sort(ids.begin(), ids.begin() + (long)n, ids.end(),
                        [&](int32_t a, int32_t b) {
                          return row[a] != row[b] ? row[a] > row[b] : a < b;
                        });
      for (size_t k = 0; k < n; ++k)
        t.top.push_back({ids[k], row[ids[k]] - norm});
    }
    return t;
  }

  const tfm_server_api *api;
  tfm_session *session;
  int parallel;
  int64_t ctx;
  int chunk, queue_limit, threads;
  int64_t vocab;
  int32_t decoder_start;
  std::set<int32_t> eog;
  Metrics &metrics;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  int outstanding = 0; // jobs submitted and not yet ended
  bool ending = false;
  int shown_running = 0;
  int64_t shown_blocks = 0, shown_pooled = 0, shown_limit = 0;

  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::vector<int32_t>> held; // tokens each sequence holds
  std::vector<int64_t> reusable;          // of them, whole prompt chunks
  std::vector<uint64_t> stamp;
  std::vector<int32_t> last; // each decoding sequence's last token
  uint64_t clock = 0;
  int ndec = 0, nrun = 0;
  std::vector<float> logits;
  std::thread thread;
};

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

/// What a completion request asked for, besides the job.
struct Ask {
  bool chat = false, stream = false, usage_in_stream = false;
  std::vector<std::string> stops;
};

class Server {
public:
  Server(const tfm_server_api *api, tfm_model *m,
         const struct tfm_tokenizer *tok, const tfm_serve_options &o)
      : api(api), model(m), tok(tok), opts(o),
        host(o.host ? o.host : "127.0.0.1"),
        name(o.model_name ? o.model_name : api->model_name(m)) {}

  ~Server() {
    if (engine)
      engine->finish();
    if (session)
      api->session_free(session);
    if (chat)
      api->chat_free(chat);
  }

  bool start(std::string &err) {
    int64_t context = api->model_context(model);
    ctx = opts.ctx_size > 0
              ? opts.ctx_size
              : (context > 0 ? std::min<int64_t>(context, 4096) : 4096);
    if (context > 0 && ctx > context) {
      err = "--ctx-size " + std::to_string(ctx) + " is past model '" +
            std::string(api->model_name(model)) + "''s context (" +
            std::to_string(context) + ")";
      return false;
    }
    if (opts.parallel < 1 || opts.parallel > 256 || opts.queue < 0 ||
        opts.timeout_s < 1 || opts.prefill_chunk < 1) {
      err = "a server needs parallel in [1, 256], queue >= 0, timeout >= 1 "
            "and prefill_chunk >= 1";
      return false;
    }
    if (api->session_create(model, opts.parallel, ctx, &session) != TFM_OK) {
      err = api->last_error();
      return false;
    }
    if (const char *src = api->chat_template(tok, nullptr))
      if (api->chat_create(src, &chat) != TFM_OK) {
        chat_error =
            std::string("the model's chat template: ") + api->last_error();
        chat = nullptr;
      }
    bos = token_text(api->bos_id(tok));
    eos = token_text(api->eos_id(tok));
    std::set<int32_t> eog;
    if (api->eos_id(tok) >= 0)
      eog.insert(api->eos_id(tok));
    // The end-of-turn tokens of published chat formats (as llama.cpp's
    // end-of-generation tokens).
    for (const char *t :
         {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>",
          "<|endoftext|>", "<|return|>", "<|end_of_text|>", "<|eom_id|>",
          "<\xef\xbd\x9c"
          "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"}) {
      int32_t id = api->token_to_id(tok, t);
      if (id >= 0 && id < api->model_vocab(model))
        eog.insert(id);
    }
    engine = std::make_unique<Engine>(
        api, model, session, opts.parallel, ctx,
        (int)std::min<int64_t>(opts.prefill_chunk, ctx), opts.queue,
        opts.threads, std::move(eog), metrics,
        api->is_encoder_decoder(model) ? opts.decoder_start : -1);
    routes();
    int threads = opts.parallel + opts.queue + 16;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr.timeout = opts.timeout_s;
    svr.set_payload_max_length(kDrain);
    port = opts.port;
    bool bound = port == 0 ? (port = svr.bind_to_any_port(host)) > 0
                           : svr.bind_to_port(host, port);
    if (!bound || !svr.widen_backlog()) {
      err = "cannot listen on " + host + ":" + std::to_string(opts.port) +
            ": " + std::strerror(errno);
      return false;
    }
    engine->start();
    listener = std::thread([this] { svr.listen_after_bind(); });
    std::fprintf(stderr,
                 "serve: listening on http://%s:%d (model %s, %d parallel, "
                 "ctx %lld)\n",
                 host.c_str(), port, name.c_str(), opts.parallel,
                 (long long)ctx);
    return true;
  }

  void ready() { is_ready = true; }

  int bound_port() const { return port; }

  void wait() {
    struct sigaction old_term, old_int;
    if (opts.handle_signals) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, &old_term);
      sigaction(SIGINT, &sa, &old_int);
    }
    {
      std::unique_lock<std::mutex> lock(stop_mu);
      while (!stop_asked && !g_signal)
        stop_cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "serve: stopping: no new connections; finishing "
                         "the requests it holds\n");
    svr.stop(); // the pool finishes the connections it serves
    if (listener.joinable())
      listener.join();
    engine->finish();
    if (opts.handle_signals) {
      sigaction(SIGTERM, &old_term, nullptr);
      sigaction(SIGINT, &old_int, nullptr);
    }
    std::fprintf(stderr, "serve: stopped\n");
  }

  void stop() {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop_asked = true;
    stop_cv.notify_all();
  }

private:
  static constexpr size_t kMaxBody = 8u << 20, kDrain = 64u << 20;

  std::string token_text(int32_t id) {
    if (id < 0)
      return "";
    char *text = nullptr;
    size_t len = 0;
    if (api->decode(tok, &id, 1, 0, &text, &len) != TFM_OK)
      return "";
    std::string r(text, len);
    api->free(text);
    return r;
  }

  std::string decode(const std::vector<int32_t> &ids) {
    char *text = nullptr;
    size_t len = 0;
    if (ids.empty() ||
        api->decode(tok, ids.data(), ids.size(), 1, &text, &len) != TFM_OK)
      return "";
    std::string r(text, len);
    api->free(text);
    return r;
  }

  /// A POST handler that reads the body itself: a body not received in
  /// timeout_s seconds (a client sending a byte a second) is dropped.
  template <typename F>
  void post(const char *path, F handle) {
    svr.Post(path, [this, handle](const httplib::Request &req,
                                  httplib::Response &res,
                                  const httplib::ContentReader &reader) {
      t_http10 = req.version == "HTTP/1.0";
      std::string body;
      size_t received = 0;
      // A body over kMaxBody is read to its end (up to kDrain) and
      // dropped, so that the client reads the 413. The read fails past the
      // request's deadline (Connection), or when the client leaves.
      bool read = reader([&](const char *data, size_t len) {
        received += len;
        if (received <= kMaxBody)
          body.append(data, len);
        return received <= kDrain;
      });
      metrics.requests++;
      Failure early{0, "", "", "invalid_request_error"};
      if (received > kMaxBody)
        early = {413, "the request body is over 8 MiB", "",
                 "invalid_request_error"};
      else if (!read)
        early = {408,
                 "the request did not arrive within the server's timeout (" +
                     std::to_string(opts.timeout_s) + " s)",
                 "", "invalid_request_error"};
      if (early.status) {
        metrics.failed++;
        answer_error(res, early);
        res.set_header("Connection", "close");
        return;
      }
      json_error_t jerr;
      Json j(json_loadb(body.data(), body.size(), JSON_ALLOW_NUL, &jerr));
      if (!j.v || !json_is_object(j.v)) {
        metrics.failed++;
        answer_error(
            res, bad(j.v ? std::string("the request body is not a JSON "
                                       "object")
                         : "malformed JSON at line " +
                               std::to_string(jerr.line) + ", column " +
                               std::to_string(jerr.column) + ": " + jerr.text));
        return;
      }
      if (!is_ready) {
        metrics.failed++;
        answer_error(res, {503, "the model is loading", "", "server_error"});
        res.set_header("Retry-After", "1");
        return;
      }
      Failure f{200, "", "", ""};
      handle(j.v, res, f);
      if (f.status != 200) {
        metrics.failed++;
        answer_error(res, f);
        if (f.status == 503)
          res.set_header("Retry-After", "1");
      }
    });
  }

  void routes() {
    // Every method a path does not take: 405.
    auto wrong = [](const char *use) {
      return [use](const httplib::Request &, httplib::Response &res) {
        answer_error(
            res, {405, std::string("use ") + use, "", "invalid_request_error"});
        res.set_header("Allow", use);
      };
    };
    for (const char *path : {"/health", "/v1/models", "/metrics"}) {
      svr.Post(path, wrong("GET"));
      svr.Put(path, wrong("GET"));
      svr.Delete(path, wrong("GET"));
      svr.Patch(path, wrong("GET"));
    }
    for (const char *path : {"/tokenize", "/detokenize", "/v1/completions",
                             "/v1/chat/completions"}) {
      svr.Get(path, wrong("POST"));
      svr.Put(path, wrong("POST"));
      svr.Delete(path, wrong("POST"));
      svr.Patch(path, wrong("POST"));
    }
    svr.Get("/health",
            [this](const httplib::Request &, httplib::Response &res) {
              res.status = is_ready ? 200 : 503;
              res.set_content(is_ready ? "{\"status\":\"ok\"}"
                                       : "{\"status\":\"loading\"}",
                              "application/json");
            });
    svr.Get(
        "/v1/models", [this](const httplib::Request &, httplib::Response &res) {
          Json j(json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list",
                           "data", "id", name.c_str(), "object", "model",
                           "created", (json_int_t)created, "owned_by", "tfm"));
          res.set_content(dump(j.v), "application/json");
        });
    svr.Get(
        "/metrics", [this](const httplib::Request &, httplib::Response &res) {
          int running, waiting;
          int64_t blocks, pooled, all;
          engine->counts(running, waiting, blocks, pooled, all);
          std::string t;
          auto metric = [&](const char *n, const char *type, const char *help,
                            double v) {
            char line[512];
            std::snprintf(line, sizeof line,
                          "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", n, help, n,
                          type, n, v);
            t += line;
          };
          metric("tfm_requests_total", "counter", "HTTP POST requests received",
                 (double)metrics.requests);
          metric("tfm_requests_failed_total", "counter",
                 "requests answered with an error", (double)metrics.failed);
          metric("tfm_requests_cancelled_total", "counter",
                 "generations stopped because their client left",
                 (double)metrics.cancelled);
          metric("tfm_prompt_tokens_total", "counter", "prompt tokens queued",
                 (double)metrics.prompt_tokens);
          metric("tfm_generated_tokens_total", "counter", "tokens generated",
                 (double)metrics.generated);
          metric("tfm_requests_running", "gauge", "requests holding a sequence",
                 running);
          metric("tfm_requests_waiting", "gauge", "requests queued", waiting);
          metric("tfm_kv_blocks_in_use", "gauge",
                 "blocks of the paged KV cache held by the running requests "
                 "and the prompts kept for reuse",
                 (double)blocks);
          metric("tfm_kv_blocks_allocated", "gauge",
                 "blocks of the paged KV cache in memory (held or free)",
                 (double)pooled);
          metric("tfm_kv_blocks_total", "gauge",
                 "blocks of the paged KV cache at most (--parallel x "
                 "--ctx-size)",
                 (double)all);
          metric("tfm_prefix_shared_total", "counter",
                 "requests that shared a running request's prefix blocks",
                 (double)metrics.shared_prefixes);
          metric("tfm_prefix_cache_hits_total", "counter",
                 "requests that continued from a cached prefix",
                 (double)metrics.prefix_hits);
          metric("tfm_prefix_tokens_reused_total", "counter",
                 "prompt tokens taken from the cache",
                 (double)metrics.reused_tokens);
          res.set_content(t, "text/plain; version=0.0.4");
        });
    post("/tokenize", [this](json_t *body, httplib::Response &res, Failure &f) {
      json_t *content = json_object_get(body, "content");
      json_t *special = json_object_get(body, "add_special");
      if (!json_is_string(content)) {
        f = bad("'content' must be a string", "content");
        return;
      }
      if (special && !json_is_boolean(special)) {
        f = bad("'add_special' must be a boolean", "add_special");
        return;
      }
      int32_t *ids = nullptr;
      size_t n = 0;
      if (api->encode(tok, json_string_value(content),
                      json_string_length(content),
                      json_is_true(special) ? TFM_TOKENIZE_ADD_SPECIAL : 0,
                      &ids, &n) != TFM_OK) {
        f = bad(std::string("'content': ") + api->last_error(), "content");
        return;
      }
      Json arr(json_array());
      for (size_t i = 0; i < n; ++i)
        json_array_append_new(arr.v, json_integer(ids[i]));
      api->free(ids);
      Json j(json_pack("{s:O}", "tokens", arr.v));
      res.set_content(dump(j.v), "application/json");
    });
    post("/detokenize", [this](json_t *body, httplib::Response &res,
                               Failure &f) {
      std::vector<int32_t> ids;
      if (!token_ids(json_object_get(body, "tokens"), "tokens", ids, f))
        return;
      Json j(json_pack("{s:s%}", "content", "", (size_t)0));
      char *text = nullptr;
      size_t len = 0;
      if (!ids.empty() &&
          api->decode(tok, ids.data(), ids.size(), 0, &text, &len) != TFM_OK) {
        f = bad(std::string("'tokens': ") + api->last_error(), "tokens");
        return;
      }
      json_object_set_new(j.v, "content", json_stringn(text ? text : "", len));
      api->free(text);
      res.set_content(dump(j.v), "application/json");
    });
    auto completion = [this](bool is_chat) {
      return [this, is_chat](json_t *body, httplib::Response &res, Failure &f) {
        complete(body, is_chat, res, f);
      };
    };
    post("/v1/completions", completion(false));
    post("/v1/chat/completions", completion(true));
    svr.set_error_handler([](const httplib::Request &req,
                             httplib::Response &res) {
      if (res.status == 404)
        answer_error(res,
                     {404, "no such endpoint: " + req.method + " " + req.path,
                      "", "invalid_request_error"});
      else if (res.status == 413)
        answer_error(res, {413, "the request body is over 8 MiB", "",
                           "invalid_request_error"});
      else if (res.body.empty())
        answer_error(res,
                     {res.status, "bad request", "", "invalid_request_error"});
    });
  }

  /// A JSON array of token ids within the vocabulary.
  bool token_ids(json_t *v, const char *param, std::vector<int32_t> &ids,
                 Failure &f) {
    if (!json_is_array(v)) {
      f = bad(std::string("'") + param + "' must be an array of token ids",
              param);
      return false;
    }
    int64_t vocab = api->model_vocab(model);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (!json_is_integer(e) || json_integer_value(e) < 0 ||
          json_integer_value(e) >= vocab) {
        f = bad(std::string("'") + param + "' element " + std::to_string(i) +
                    " is not a token id in [0, " + std::to_string(vocab) + ")",
                param);
        return false;
      }
      ids.push_back((int32_t)json_integer_value(e));
    }
    return true;
  }

  /// Reads the fields both endpoints share into the job and `ask`.
  bool fields(json_t *body, bool is_chat, Job &job, Ask &ask, Failure &f) {
    auto number = [&](const char *key, double lo, double hi, double &out) {
      json_t *v = json_object_get(body, key);
      if (!v || json_is_null(v))
        return true;
      if (!json_is_number(v) || json_number_value(v) < lo ||
          json_number_value(v) > hi) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "'%s' must be a number in [%g, %g]", key,
                      lo, hi);
        f = bad(msg, key);
        return false;
      }
      out = json_number_value(v);
      return true;
    };
    auto integer = [&](const char *key, json_int_t lo, json_int_t hi,
                       json_int_t &out) {
      json_t *v = json_object_get(body, key);
      if (!v || json_is_null(v))
        return true;
      if (!json_is_integer(v) || json_integer_value(v) < lo ||
          json_integer_value(v) > hi) {
        f = bad(std::string("'") + key + "' must be an integer from " +
                    std::to_string(lo) + " to " + std::to_string(hi),
                key);
        return false;
      }
      out = json_integer_value(v);
      return true;
    };
    auto boolean = [&](json_t *obj, const char *key, bool &out) {
      json_t *v = json_object_get(obj, key);
      if (!v || json_is_null(v))
        return true;
      if (!json_is_boolean(v)) {
        f = bad(std::string("'") + key + "' must be a boolean", key);
        return false;
      }
      out = json_is_true(v);
      return true;
    };
    json_t *model_v = json_object_get(body, "model");
    if (model_v && !json_is_string(model_v) && !json_is_null(model_v)) {
      f = bad("'model' must be a string", "model");
      return false;
    }
    json_int_t max_tokens = -1, top_k = 0, seed = -1, n = 1;
    if (!number("temperature", 0.0, 100.0, job.temperature) ||
        !number("top_p", 0.0, 1.0, job.top_p) ||
        !integer("top_k", 0, INT32_MAX, top_k) ||
        !integer("seed", INT64_MIN, INT64_MAX, seed) ||
        !integer("n", 1, 1, n) ||
        !integer("max_tokens", 1, INT32_MAX, max_tokens) ||
        (is_chat &&
         !integer("max_completion_tokens", 1, INT32_MAX, max_tokens)) ||
        !boolean(body, "stream", ask.stream))
      return false;
    if (job.top_p <= 0.0) {
      f = bad("'top_p' must be in (0, 1]", "top_p");
      return false;
    }
    job.top_k = top_k;
    job.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)next_id.load() * 7919u;
    job.max_tokens = max_tokens;
    json_t *so = json_object_get(body, "stream_options");
    if (so && !json_is_null(so)) {
      if (!json_is_object(so)) {
        f = bad("'stream_options' must be an object", "stream_options");
        return false;
      }
      if (!boolean(so, "include_usage", ask.usage_in_stream))
        return false;
    }
    json_t *stop = json_object_get(body, "stop");
    if (json_is_string(stop))
      ask.stops.push_back(json_string_value(stop));
    else if (json_is_array(stop) && json_array_size(stop) <= 16) {
      size_t i;
      json_t *e;
      json_array_foreach(stop, i, e) {
        if (!json_is_string(e) || !json_string_length(e)) {
          f = bad("'stop' must be a string or an array of up to 16 non-empty "
                  "strings",
                  "stop");
          return false;
        }
        ask.stops.push_back(json_string_value(e));
      }
    } else if (stop && !json_is_null(stop)) {
      f = bad("'stop' must be a string or an array of up to 16 non-empty "
              "strings",
              "stop");
      return false;
    }
    json_t *lp = json_object_get(body, "logprobs");
    if (is_chat) {
      bool want = false;
      json_int_t top = 0;
      if (!boolean(body, "logprobs", want) ||
          !integer("top_logprobs", 0, 20, top))
        return false;
      job.top_logprobs = want ? (int)top : -1;
    } else if (lp && !json_is_null(lp)) {
      if (!json_is_integer(lp) || json_integer_value(lp) < 0 ||
          json_integer_value(lp) > 20) {
        f = bad("'logprobs' must be an integer from 0 to 20", "logprobs");
        return false;
      }
      job.top_logprobs = (int)json_integer_value(lp);
    }
    return true;
  }

  /// The prompt of a chat request: its messages through the template.
  bool chat_prompt(json_t *body, Job &job, Failure &f) {
    json_t *messages = json_object_get(body, "messages");
    if (!json_is_array(messages) || !json_array_size(messages)) {
      f = bad("'messages' must be a non-empty array", "messages");
      return false;
    }
    Json msgs(json_array());
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
      json_t *role = json_object_get(m, "role");
      json_t *content = json_object_get(m, "content");
      std::string where = "messages[" + std::to_string(i) + "]";
      if (!json_is_object(m) || !json_is_string(role)) {
        f = bad("'" + where + "' must be an object with a string 'role'",
                "messages");
        return false;
      }
      Json copy(json_deep_copy(m));
      if (json_is_array(content)) {
        // Content parts: the text parts, joined.
        std::string text;
        size_t k;
        json_t *part;
        json_array_foreach(content, k, part) {
          json_t *t = json_object_get(part, "text");
          if (!json_is_string(json_object_get(part, "type")) ||
              std::strcmp(json_string_value(json_object_get(part, "type")),
                          "text") ||
              !json_is_string(t)) {
            f = bad("'" + where + "' content parts must be text parts",
                    "messages");
            return false;
          }
          text.append(json_string_value(t), json_string_length(t));
        }
        json_object_set_new(copy.v, "content",
                            json_stringn(text.data(), text.size()));
      } else if (content && !json_is_string(content) &&
                 !json_is_null(content)) {
        f = bad("'" + where +
                    "' content must be a string or an array of "
                    "text parts",
                "messages");
        return false;
      }
      json_array_append_new(msgs.v, copy.release());
    }
    if (!chat) {
      f = {400,
           chat_error.empty() ? "the model's tokenizer has no chat template"
                              : chat_error,
           "messages", "invalid_request_error"};
      return false;
    }
    Json context(json_pack("{s:O, s:b, s:s, s:s}", "messages", msgs.v,
                           "add_generation_prompt", 1, "bos_token", bos.c_str(),
                           "eos_token", eos.c_str()));
    for (const char *key : {"tools", "tool_choice"})
      if (json_t *v = json_object_get(body, key))
        json_object_set(context.v, key, v);
    char *text = nullptr;
    size_t len = 0;
    if (api->chat_render(chat, dump(context.v).c_str(), &text, &len) !=
        TFM_OK) {
      f = bad(std::string("the chat template: ") + api->last_error(),
              "messages");
      return false;
    }
    int32_t *ids = nullptr;
    size_t n = 0;
    tfm_status st = api->encode(tok, text, len, 0, &ids, &n);
    api->free(text);
    if (st != TFM_OK) {
      f = bad(std::string("the rendered chat: ") + api->last_error(),
              "messages");
      return false;
    }
    job.prompt.assign(ids, ids + n);
    api->free(ids);
    return true;
  }

  bool completion_prompt(json_t *body, Job &job, Failure &f) {
    json_t *p = json_object_get(body, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        json_is_string(json_array_get(p, 0)))
      p = json_array_get(p, 0);
    if (json_is_string(p)) {
      int32_t *ids = nullptr;
      size_t n = 0;
      if (api->encode(tok, json_string_value(p), json_string_length(p),
                      TFM_TOKENIZE_ADD_SPECIAL, &ids, &n) != TFM_OK) {
        f = bad(std::string("'prompt': ") + api->last_error(), "prompt");
        return false;
      }
      job.prompt.assign(ids, ids + n);
      api->free(ids);
      return true;
    }
    if (json_is_array(p))
      return token_ids(p, "prompt", job.prompt, f);
    f = bad("'prompt' must be a string or an array of token ids (one "
            "prompt per request)",
            "prompt");
    return false;
  }

  void complete(json_t *body, bool is_chat, httplib::Response &res,
                Failure &f) {
    auto job = std::make_shared<Job>();
    Ask ask;
    ask.chat = is_chat;
    if (!fields(body, is_chat, *job, ask, f) ||
        !(is_chat ? chat_prompt(body, *job, f)
                  : completion_prompt(body, *job, f)))
      return;
    int64_t plen = (int64_t)job->prompt.size();
    if (plen == 0) {
      f = bad("the prompt gives no tokens", is_chat ? "messages" : "prompt");
      return;
    }
    int64_t vocab = api->model_vocab(model);
    for (int32_t id : job->prompt)
      if (id >= vocab) {
        f = bad("the prompt's token " + std::to_string(id) +
                    " is outside the model's vocabulary (" +
                    std::to_string(vocab) +
                    "): the tokenizer does not fit "
                    "the model",
                is_chat ? "messages" : "prompt");
        return;
      }
    // An encoder-decoder's prompt is its source (up to the context), and
    // its target has the context less the start token.
    bool encdec = api->is_encoder_decoder(model);
    if (encdec ? plen > ctx : plen >= ctx) {
      f = bad("the prompt has " + std::to_string(plen) +
                  " tokens; the server's context is " + std::to_string(ctx) +
                  (encdec ? ""
                          : " (room for at least one generated token "
                            "is needed)"),
              is_chat ? "messages" : "prompt");
      return;
    }
    int64_t room = encdec ? ctx - 1 : ctx - plen;
    // max_tokens past the context stops there (finish_reason "length").
    if (job->max_tokens < 0)
      job->max_tokens = is_chat ? room : 16;
    job->max_tokens = std::min<int64_t>(job->max_tokens, room);
    uint64_t id = next_id++;
    if (!engine->submit(job)) {
      f = {503, "the server is busy: its queue is full", "", "server_error"};
      return;
    }
    metrics.prompt_tokens += (uint64_t)plen;
    std::string rid = (is_chat ? "chatcmpl-" : "cmpl-") +
                      std::to_string(created) + "-" + std::to_string(id);
    if (!ask.stream) {
      Result r = collect(*job, ask, nullptr);
      Json out(response(*job, ask, rid, r));
      res.set_content(dump(out.v), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    auto provider = [this, job, ask, rid](size_t, httplib::DataSink &sink) {
      bool ok = true;
      auto send = [&](json_t *chunk) {
        std::string s = "data: " + dump(chunk) + "\n\n";
        json_decref(chunk);
        if (ok && !sink.write(s.data(), s.size()))
          ok = false;
        return ok;
      };
      if (ask.chat)
        send(chunk_json(ask, rid, "", true, nullptr, nullptr));
      Result r =
          collect(*job, ask, [&](const std::string &delta, json_t *logprobs) {
            return send(chunk_json(ask, rid, delta, false, nullptr, logprobs));
          });
      if (ok && !r.error.empty())
        send(json_pack("{s:{s:s, s:s}}", "error", "message", r.error.c_str(),
                       "type", "server_error"));
      else if (ok)
        send(chunk_json(ask, rid, "", false, r.finish.c_str(), nullptr));
      if (ok && ask.usage_in_stream) {
        json_t *u = chunk_json(ask, rid, "", false, nullptr, nullptr);
        json_object_set_new(u, "choices", json_array());
        json_object_set_new(u, "usage", usage(*job, r));
        send(u);
      }
      if (ok) {
        static const char done[] = "data: [DONE]\n\n";
        ok = sink.write(done, sizeof done - 1);
      }
      if (!ok) {
        job->cancelled = true;
        engine->poke();
        return false;
      }
      sink.done();
      return true;
    };
    auto released = [this, job](bool success) {
      bool done;
      {
        std::lock_guard<std::mutex> lock(job->mu);
        done = job->done;
      }
      if (!success && !done) {
        job->cancelled = true;
        engine->poke();
      }
    };
    // HTTP/1.0 has no chunks: the events as they come, then the close.
    if (t_http10)
      res.set_content_provider("text/event-stream", provider, released);
    else
      res.set_chunked_content_provider("text/event-stream", provider, released);
  }

  struct Result {
    std::string text, finish, error;
    size_t tokens = 0; // generated tokens in the answer
  };

  /// Waits for the job's tokens and makes text of them: stop strings end
  /// it (the engine is told), text is handed on as it is final (not an
  /// incomplete character, not a possible start of a stop string).
  using Emit = std::function<bool(const std::string &, json_t *)>;
  Result collect(Job &job, const Ask &ask, const Emit &emit) {
    Result r;
    std::vector<int32_t> ids;
    size_t seen = 0, sent = 0;
    std::string text;
    bool gone = false; // the client left (emit failed, or its socket closed)
    auto checked = std::chrono::steady_clock::now();
    // Whether the client left, looked at once per 100 ms.
    auto client_left = [](std::chrono::steady_clock::time_point &last) {
      auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(100))
        return false;
      last = now;
      return peer_gone(t_socket);
    };
    for (;;) {
      std::vector<Token> fresh;
      bool done;
      {
        std::unique_lock<std::mutex> lock(job.mu);
        // A client that leaves cancels its request: checked every 100 ms,
        // whether tokens come or not (a stream's writes would fail too, but
        // a non-streamed answer writes nothing until the end).
        while (!job.done && job.tokens.size() <= seen && !gone) {
          job.cv.wait_for(lock, std::chrono::milliseconds(100));
          gone = client_left(checked);
        }
        gone = gone || client_left(checked);
        if (gone && !job.done) {
          lock.unlock();
          job.cancelled = true;
          engine->poke();
          break;
        }
        fresh.assign(job.tokens.begin() + (long)seen, job.tokens.end());
        seen = job.tokens.size();
        done = job.done;
        if (done) {
          r.finish = job.finish;
          r.error = job.error;
        }
      }
      bool stopped = false;
      for (const Token &t : fresh) {
        ids.push_back(t.id);
        text = decode(ids);
        size_t cut = text.size();
        for (const std::string &s : ask.stops) {
          size_t at = text.find(s, sent > s.size() ? sent - s.size() : 0);
          if (at != std::string::npos && at < cut) {
            cut = at;
            stopped = true;
          }
        }
        r.tokens = ids.size();
        if (stopped) {
          text.resize(cut);
          break;
        }
        // Hold back an incomplete character and a possible stop string's
        // beginning.
        size_t final_len = text.size();
        while (final_len >= 3 &&
               !text.compare(final_len - 3, 3, "\xEF\xBF\xBD"))
          final_len -= 3;
        size_t held_back = 0;
        for (const std::string &s : ask.stops)
          for (size_t k = std::min(s.size() - 1, final_len); k > held_back; --k)
            if (!text.compare(final_len - k, k, s, 0, k)) {
              held_back = k;
              break;
            }
        final_len -= held_back;
        json_t *lp = job.top_logprobs >= 0
                         ? logprobs_json(ask, std::vector<Token>{t})
                         : nullptr;
        if (emit && (final_len > sent || lp)) {
          if (!emit(final_len > sent ? text.substr(sent, final_len - sent)
                                     : std::string(),
                    lp)) {
            gone = true;
            break;
          }
          sent = std::max(sent, final_len);
        } else {
          json_decref(lp);
        }
      }
      if (gone)
        break;
      if (stopped) {
        job.stop = true;
        engine->poke();
        r.finish = "stop";
        // The engine ends the job; its tokens past the stop are not ours.
        std::unique_lock<std::mutex> lock(job.mu);
        job.cv.wait(lock, [&] { return job.done; });
        break;
      }
      if (done) {
        text = decode(ids);
        if (r.finish == "cancelled")
          r.finish = "stop";
        break;
      }
    }
    if (emit && !gone && text.size() > sent)
      emit(text.substr(sent), nullptr);
    r.text = text;
    {
      std::lock_guard<std::mutex> lock(job.mu);
      r.tokens =
          std::min(r.tokens ? r.tokens : job.tokens.size(), job.tokens.size());
    }
    if (r.finish == "error" && r.error.empty())
      r.error = "generation failed";
    return r;
  }

  json_t *logprobs_json(const Ask &ask, const std::vector<Token> &tokens) {
    if (ask.chat) {
      json_t *content = json_array();
      for (const Token &t : tokens) {
        json_t *top = json_array();
        for (auto &[id, lp] : t.top)
          json_array_append_new(top, json_pack("{s:s, s:f}", "token",
                                               token_text(id).c_str(),
                                               "logprob", (double)lp));
        json_array_append_new(content, json_pack("{s:s, s:f, s:o}", "token",
                                                 token_text(t.id).c_str(),
                                                 "logprob", (double)t.logprob,
                                                 "top_logprobs", top));
      }
      return json_pack("{s:o}", "content", content);
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array();
    for (const Token &t : tokens) {
      json_array_append_new(toks, json_string(token_text(t.id).c_str()));
      json_array_append_new(lps, json_real(t.logprob));
      json_t *top = json_object();
      for (auto &[id, lp] : t.top)
        json_object_set_new(top, token_text(id).c_str(), json_real(lp));
      json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps,
                     "top_logprobs", tops);
  }

  json_t *usage(const Job &job, const Result &r) {
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens",
                     (json_int_t)job.prompt.size(), "completion_tokens",
                     (json_int_t)r.tokens, "total_tokens",
                     (json_int_t)(job.prompt.size() + r.tokens),
                     "prompt_tokens_details", "cached_tokens",
                     (json_int_t)job.reused);
  }

  /// A streamed chunk: role (chat's first), a text delta, or the finish.
  json_t *chunk_json(const Ask &ask, const std::string &rid,
                     const std::string &delta, bool role, const char *finish,
                     json_t *logprobs) {
    json_t *choice;
    if (ask.chat) {
      json_t *d = json_object();
      if (role)
        json_object_set_new(d, "role", json_string("assistant"));
      if (role || !delta.empty() || (!finish && logprobs))
        json_object_set_new(d, "content",
                            json_stringn(delta.data(), delta.size()));
      choice =
          json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", d, "logprobs",
                    logprobs ? logprobs : json_null(), "finish_reason",
                    finish ? json_string(finish) : json_null());
    } else {
      choice = json_pack("{s:i, s:s%, s:o, s:o}", "index", 0, "text",
                         delta.data(), delta.size(), "logprobs",
                         logprobs ? logprobs : json_null(), "finish_reason",
                         finish ? json_string(finish) : json_null());
    }
    json_t *c = json_pack(
        "{s:s, s:s, s:I, s:s, s:[o]}", "id", rid.c_str(), "object",
        ask.chat ? "chat.completion.chunk" : "text_completion", "created",
        (json_int_t)created, "model", name.c_str(), "choices", choice);
    if (ask.usage_in_stream)
      json_object_set_new(c, "usage", json_null());
    return c;
  }

  json_t *response(Job &job, const Ask &ask, const std::string &rid,
                   const Result &r) {
    std::vector<Token> tokens;
    {
      std::lock_guard<std::mutex> lock(job.mu);
      tokens.assign(job.tokens.begin(), job.tokens.begin() + (long)r.tokens);
    }
    json_t *lp = job.top_logprobs >= 0 ? logprobs_json(ask, tokens) : nullptr;
    json_t *choice;
    const char *finish = r.error.empty() ? r.finish.c_str() : "error";
    if (ask.chat)
      choice = json_pack("{s:i, s:{s:s, s:s%}, s:o, s:s}", "index", 0,
                         "message", "role", "assistant", "content",
                         r.text.data(), r.text.size(), "logprobs",
                         lp ? lp : json_null(), "finish_reason", finish);
    else
      choice = json_pack("{s:i, s:s%, s:o, s:s}", "index", 0, "text",
                         r.text.data(), r.text.size(), "logprobs",
                         lp ? lp : json_null(), "finish_reason", finish);
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", rid.c_str(),
                     "object", ask.chat ? "chat.completion" : "text_completion",
                     "created", (json_int_t)created, "model", name.c_str(),
                     "choices", choice, "usage", usage(job, r));
  }

  const tfm_server_api *api;
  tfm_model *model;
  const struct tfm_tokenizer *tok;
  tfm_serve_options opts;
  std::string host, name, bos, eos, chat_error;
  int port = 0;
  int64_t ctx = 0;
  time_t created = time(nullptr);
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> is_ready{false};
  tfm_session *session = nullptr;
  tfm_chat_template *chat = nullptr;
  Metrics metrics;
  std::unique_ptr<Engine> engine;
  HttpServer svr;
  std::thread listener;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop_asked = false;
};

} // namespace

extern "C" {

__attribute__((visibility("default"))) void *
tfm_server_bridge_start(const tfm_server_api *api, tfm_model *m,
                        const struct tfm_tokenizer *tok,
                        const tfm_serve_options *o, char *err, size_t err_len) {
  if (api->version != TFM_SERVER_API_VERSION) {
    std::snprintf(err, err_len,
                  "libtfm_server.so is of another tfm (API version %d, the "
                  "program's %d)",
                  TFM_SERVER_API_VERSION, api->version);
    return nullptr;
  }
  auto s = std::make_unique<Server>(api, m, tok, *o);
  std::string e;
  if (!s->start(e)) {
    std::snprintf(err, err_len, "%s", e.c_str());
    return nullptr;
  }
  return s.release();
}

__attribute__((visibility("default"))) void tfm_server_bridge_ready(void *s) {
  static_cast<Server *>(s)->ready();
}

__attribute__((visibility("default"))) void tfm_server_bridge_wait(void *s) {
  static_cast<Server *>(s)->wait();
}

__attribute__((visibility("default"))) void tfm_server_bridge_stop(void *s) {
  static_cast<Server *>(s)->stop();
}

__attribute__((visibility("default"))) int tfm_server_bridge_port(void *s) {
  return static_cast<Server *>(s)->bound_port();
}

__attribute__((visibility("default"))) void tfm_server_bridge_free(void *s) {
  delete static_cast<Server *>(s);
}
}
