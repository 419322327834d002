/*===- chat_template_internal.h - what the chat template files share -*- C -*-*
 *
 * chat_template.c holds the values, their memory (arenas), their printing
 * (Python's str() and repr(), json.dumps) and the API;
 * chat_template_parse.c the lexer and parser (source -> tree);
 * chat_template_eval.c the evaluator with the filters, tests, methods and
 * globals.
 *
 * Errors inside the library unwind with longjmp to the API function that
 * set up the jump buffer; everything is allocated from arenas that the API
 * function frees, so nothing leaks on an error.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_CHAT_TEMPLATE_INTERNAL_H
#define TFM_CHAT_TEMPLATE_INTERNAL_H

#include "internal.h"
#include "tfm/chat_template.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*===- Memory -------------------------------------------------------------===*/

typedef struct ct_block ct_block;
typedef struct ct_arena {
  ct_block *head;
  size_t used;  /* bytes allocated so far */
  size_t limit; /* 0: none */
  jmp_buf *jmp; /* where a failure unwinds to */
  tfm_status status;
  char *msg; /* message buffer of the failure (TFM_ERROR_SIZE) */
} ct_arena;

/* Records the error and unwinds to a->jmp. */
_Noreturn void ct_fail(ct_arena *a, tfm_status s, int line, int col,
                       const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void *ct_alloc(ct_arena *a, size_t n);
char *ct_strndup(ct_arena *a, const char *s, size_t n);
void ct_arena_free(ct_arena *a);

/* A growable byte buffer in an arena. */
typedef struct ct_buf {
  char *s;
  size_t n, cap;
  size_t limit; /* 0: none */
} ct_buf;
void ct_buf_add(ct_arena *a, ct_buf *b, const char *s, size_t n);
void ct_buf_str(ct_arena *a, ct_buf *b, const char *s);
void ct_buf_printf(ct_arena *a, ct_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*===- Values -------------------------------------------------------------===*/

typedef enum ct_kind {
  CT_UNDEF,
  CT_NONE,
  CT_BOOL,
  CT_INT,
  CT_FLOAT,
  CT_STR,
  CT_LIST,  /* list or tuple */
  CT_DICT,  /* dict; insertion order */
  CT_NS,    /* namespace(): a mutable dict */
  CT_MACRO, /* a macro defined by the template */
  CT_FUNC,  /* a global function or a bound method */
  CT_LOOP,  /* a for loop's `loop` */
} ct_kind;

typedef struct ct_list ct_list;
typedef struct ct_dict ct_dict;
typedef struct ct_node ct_node;
typedef struct ct_value ct_value;
/* A for loop's state: its items and the current index. */
typedef struct ct_loop {
  const ct_list *items;
  size_t index;
} ct_loop;

struct ct_value {
  ct_kind kind;
  union {
    bool b;
    int64_t i;
    double f;
    /* CT_STR: UTF-8, NUL-terminated; CT_UNDEF: the hint ("'x' is
     * undefined") or NULL. */
    struct {
      const char *s;
      size_t n;
    } str;
    ct_list *list;
    ct_dict *dict; /* CT_DICT, CT_NS */
    const ct_node *macro;
    const ct_loop *loop;
    struct {
      const char *name;
      const ct_value *self; /* NULL for a global */
    } fn;
  } u;
};

struct ct_list {
  size_t n;
  bool tuple;
  ct_value *items;
};

struct ct_dict {
  size_t n, cap;
  ct_value *keys;
  ct_value *vals;
};

ct_value ct_undef(const char *hint);
ct_value ct_none(void);
ct_value ct_bool(bool b);
ct_value ct_int(int64_t i);
ct_value ct_float(double f);
ct_value ct_str(const char *s, size_t n); /* s must outlive the value */
ct_value ct_cstr(const char *s);
ct_value ct_new_list(ct_arena *a, size_t n, bool tuple);
ct_value ct_new_dict(ct_arena *a);
/* Sets key (replacing an equal key in place). */
void ct_dict_set(ct_arena *a, ct_dict *d, ct_value key, ct_value val);
/* The value of a string key, or NULL. */
ct_value *ct_dict_get(const ct_dict *d, const char *key, size_t n);
ct_value *ct_dict_find(const ct_dict *d, ct_value key);

bool ct_truthy(ct_value v);
bool ct_equal(ct_value x, ct_value y);
/* Python's str(v) and repr(v), appended to b. */
void ct_to_str(ct_arena *a, ct_buf *b, ct_value v);
void ct_repr(ct_arena *a, ct_buf *b, ct_value v);
/* str(v) as a value (a string is returned as is). */
ct_value ct_as_str(ct_arena *a, ct_value v);
/* json.dumps(v, ensure_ascii=ascii, indent=..., separators=...,
 * sort_keys=...); indent NULL: none. Fails for values JSON cannot hold. */
void ct_json(ct_arena *a, ct_buf *b, ct_value v, const char *indent,
             const char *item_sep, const char *key_sep, bool sort_keys,
             bool ascii, int depth, int line, int col);
const char *ct_type_name(ct_value v);
void ct_format_float(double f, char out[32]);

/*===- Trees --------------------------------------------------------------===*/

typedef enum ct_node_kind {
  /* statements */
  N_TEXT,     /* text: u.str */
  N_OUTPUT,   /* {{ a }} */
  N_IF,       /* if a: body else: els (an N_IF for elif, or N_BODY) */
  N_FOR,      /* for names in a if b: body else: els */
  N_SET,      /* set names = a; or set ns.attr = a (attr) */
  N_SETBLOCK, /* set name %}body{% endset */
  N_MACRO,    /* macro name(params=defaults): body */
  N_BREAK,
  N_CONTINUE,
  N_BODY, /* a list of statements (else, generation) */
  /* expressions */
  E_LIT,    /* u.lit */
  E_NAME,   /* name */
  E_LIST,   /* [args] */
  E_TUPLE,  /* (args) */
  E_DICT,   /* {args[2i]: args[2i+1]} */
  E_ATTR,   /* a.name */
  E_ITEM,   /* a[b] */
  E_SLICE,  /* a[b:c:d] (any may be NULL) */
  E_CALL,   /* a(args, kw) */
  E_FILTER, /* a | name(args, kw) */
  E_TEST,   /* a is [not] name(args) (op: negated) */
  E_NOT,
  E_NEG,
  E_POS,
  E_BINARY, /* a op b */
  E_AND,
  E_OR,
  E_COND,    /* b if a else c */
  E_COMPARE, /* a ops[i] args[i] ... */
} ct_node_kind;

/* Binary and comparison operators. */
enum {
  OP_ADD,
  OP_SUB,
  OP_MUL,
  OP_DIV,
  OP_FLOORDIV,
  OP_MOD,
  OP_POW,
  OP_CONCAT,
  OP_EQ,
  OP_NE,
  OP_LT,
  OP_LE,
  OP_GT,
  OP_GE,
  OP_IN,
  OP_NOTIN,
};

struct ct_node {
  ct_node_kind kind;
  int line, col;
  int op;
  const char *name; /* name, attribute, filter, test, macro */
  const char *attr; /* N_SET of ns.attr */
  ct_value lit;     /* E_LIT; N_TEXT's text */
  ct_node *a, *b, *c, *d;
  ct_node **args; /* positional arguments, elements, operands */
  size_t nargs;
  const char **kwnames; /* keyword arguments; macro parameters */
  ct_node **kwvals;     /* their values; macro defaults (NULL: none) */
  size_t nkw;
  const char **names; /* N_FOR, N_SET targets */
  size_t nnames;
  int *ops; /* E_COMPARE */
  ct_node **body;
  size_t nbody;
  ct_node *els;
};

/* Parses source into a list of statements; fails through a->jmp. */
ct_node *ct_parse(ct_arena *a, const char *source);

/* Known filters and tests (the parser rejects others as Jinja2 does). */
bool ct_is_filter(const char *name);
bool ct_is_test(const char *name);

/* Renders the statements of `root` with the context `ctx` (a CT_DICT). */
void ct_render(ct_arena *a, const ct_node *root, ct_value ctx, ct_buf *out);

#endif /* TFM_CHAT_TEMPLATE_INTERNAL_H */
