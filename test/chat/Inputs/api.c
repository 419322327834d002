/* The C API of tfm/chat_template.h: a template compiled once renders many
 * contexts; errors are statuses with tfm_last_error() giving the line and
 * column; nothing is printed by the library. */
#include "tfm/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  return ok ? 0 : 1;
}

int main(void) {
  int bad = 0;
  tfm_chat_template *t = NULL;
  const char *src =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  bad |= check(tfm_chat_template_create(src, &t) == TFM_OK && t, "create");
  char *text = NULL;
  size_t len = 0;
  tfm_status s = tfm_chat_template_render(
      t,
      "{\"bos_token\": \"<s>\", \"add_generation_prompt\": true, "
      "\"messages\": [{\"role\": \"user\", \"content\": \"Hi \\u00e9\"}]}",
      &text, &len);
  bad |= check(s == TFM_OK &&
                   !strcmp(text, "<s><|user|>Hi \xc3\xa9<|assistant|>") &&
                   len == strlen(text),
               "render");
  free(text);
  s = tfm_chat_template_render(t, "{\"messages\": []}", &text, NULL);
  bad |= check(s == TFM_OK && !strcmp(text, ""), "render again, other context");
  free(text);
  s = tfm_chat_template_render(t, "[1]", &text, NULL);
  bad |=
      check(s == TFM_ERR_ARGUMENT && !text, "a context that is not an object");
  printf("%s\n", tfm_last_error());
  s = tfm_chat_template_render(t, "{\"messages\": 3}", &text, NULL);
  bad |= check(s == TFM_ERR_FORMAT && !text, "a rendering error");
  printf("%s\n", tfm_last_error());
  tfm_chat_template_free(t);

  tfm_chat_template *u = (tfm_chat_template *)1;
  s = tfm_chat_template_create("ok\n{% if %}", &u);
  bad |= check(s == TFM_ERR_FORMAT && !u, "a syntax error");
  printf("%s\n", tfm_last_error());
  s = tfm_chat_template_create("{{ raise_exception('no ' ~ 'way') }}", &u);
  bad |= check(s == TFM_OK, "create raise");
  s = tfm_chat_template_render(u, "{}", &text, NULL);
  bad |= check(s == TFM_ERR_FORMAT, "raise_exception");
  printf("%s\n", tfm_last_error());
  tfm_chat_template_free(u);
  tfm_chat_template_free(NULL);
  return bad;
}
