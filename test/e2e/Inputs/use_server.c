/* The server from the C API (tfm/server.h) in a program that links a
 * decoder compiled with `tfmc -c`: started on a free port while "loading"
 * (/health 503), made ready, asked for a greedy completion over plain
 * sockets from a second thread, which then stops it; tfm_server_wait
 * returns and everything is freed. The completion's text must be what the
 * session API gives for the same prompt. Built with -DMODEL=name. */
#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#include STR(MODEL.h)

#include "tfm/server.h"
#include "tfm/tokenizer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void check(tfm_status s, const char *what) {
  if (s != TFM_OK) {
    fprintf(stderr, "error: %s: %s\n", what, tfm_last_error());
    exit(1);
  }
}

/* One HTTP/1.1 request to 127.0.0.1:port; the whole answer, or NULL. */
static char *request(int port, const char *method, const char *path,
                     const char *body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  /* A server that never answers fails the test instead of hanging it. */
  struct timeval limit = {60, 0};
  if (fd < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0 ||
      connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
    return NULL;
  char head[512];
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                   "\r\n",
                   method, path, body ? strlen(body) : 0);
  if (write(fd, head, (size_t)n) != n ||
      (body && write(fd, body, strlen(body)) != (ssize_t)strlen(body))) {
    close(fd);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  ssize_t r;
  while ((r = read(fd, out + len, cap - 1 - len)) > 0)
    len += (size_t)r;
  out[len] = 0;
  close(fd);
  return out;
}

static tfm_server *server;
static char *health, *completion;

static void *client(void *arg) {
  int port = tfm_server_port(server);
  (void)arg;
  completion = request(port, "POST", "/v1/completions",
                       "{\"prompt\": [1, 2, 3], \"max_tokens\": 6, "
                       "\"temperature\": 0}");
  tfm_server_stop(server);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TOKENIZER\n", argv[0]);
    return 2;
  }
  tfm_model *m;
  check(tfm_model_create(CAT(MODEL, _model_json), CAT(MODEL, _forward), &m),
        "create");
  check(tfm_model_set_step(m, CAT(MODEL, _step)), "set_step");
  tfm_tokenizer *tok;
  check(tfm_tokenizer_load(argv[1], &tok), "tokenizer");

  tfm_serve_options o;
  tfm_serve_options_init(&o);
  o.port = 0;
  o.parallel = 2;
  check(tfm_server_start(m, tok, &o, &server), "start");
  health = request(tfm_server_port(server), "GET", "/health", NULL);
  printf("while loading: %s\n",
         health && strstr(health, " 503 ") && strstr(health, "loading")
             ? "503 loading"
             : "WRONG");
  free(health);
  check(tfm_model_random_weights(m, 3), "weights");
  check(tfm_server_set_ready(server), "ready");
  pthread_t t;
  pthread_create(&t, NULL, client, NULL);
  check(tfm_server_wait(server), "wait");
  pthread_join(t, NULL);
  tfm_server_free(server);

  /* The same greedy tokens through a session. */
  tfm_session *s;
  check(tfm_session_create(m, 1, 16, &s), "session");
  int64_t vocab = tfm_model_vocab(m);
  float *row = malloc(sizeof(float) * (size_t)vocab);
  const int32_t prompt[] = {1, 2, 3};
  check(tfm_session_append(s, 0, prompt, 3, row), "append");
  int32_t ids[6];
  for (int i = 0; i < 6; ++i) {
    int32_t best = 0;
    for (int32_t j = 1; j < vocab; ++j)
      if (row[j] > row[best])
        best = j;
    ids[i] = best;
    if (i + 1 < 6)
      check(tfm_session_decode(s, 1, &ids[i], row), "decode");
  }
  char *text;
  size_t len;
  check(tfm_tokenizer_decode(tok, ids, 6, 1, &text, &len), "decode text");
  /* The text as JSON writes it: this tokenizer's pieces are ASCII letters
   * and spaces. */
  char want[256];
  snprintf(want, sizeof want, "\"text\":\"%s\"", text);
  printf("completion: %s\n",
         completion && strstr(completion, " 200 ") && strstr(completion, want)
             ? "200, the session's greedy text"
             : "WRONG");
  if (!completion || !strstr(completion, want))
    fprintf(stderr, "got: %s\nwanted: %s\n", completion ? completion : "-",
            want);
  printf("stopped and freed\n");
  free(text);
  free(completion);
  free(row);
  tfm_session_free(s);
  tfm_tokenizer_free(tok);
  tfm_model_destroy(m);
  return 0;
}
