// Reading one JSONL conversation record (conv.h: the forms and what is refused).
#define _POSIX_C_SOURCE 200809L
#include "io/conv.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

const char *lc_role_name(lc_role r) { return r == LC_ROLE_SYSTEM ? "system" : r == LC_ROLE_USER ? "user" : "assistant"; }

static lc_status add(lc_conv *c, lc_role role, const char *text) {
  lc_conv_msg *m = realloc(c->msgs, sizeof *m * (size_t)(c->n + 1));
  if (!m) return lc_fail(LC_ENOMEM, "out of memory reading a conversation");
  c->msgs = m;
  char *s = strdup(text);
  if (!s) return lc_fail(LC_ENOMEM, "out of memory reading a conversation");
  m[c->n].role = role;
  m[c->n].content = s;
  c->n++;
  if (role == LC_ROLE_SYSTEM && c->n > 1)
    return lc_fail(LC_EFORMAT, "turn %d is a system turn, but only the first turn may be one (two system turns, or a "
                   "system turn after the conversation began)", c->n);
  return LC_OK;
}

static lc_status parse(lc_conv *c, const cJSON *j) {
  if (!cJSON_IsObject(j)) return lc_fail(LC_EFORMAT, "the record is not a JSON object");
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
  const int sharegpt = !msgs;
  if (!msgs) msgs = cJSON_GetObjectItemCaseSensitive(j, "conversations");
  if (!msgs) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *q = cJSON_GetObjectItemCaseSensitive(j, "completion");
    if (!p && !q)
      return lc_fail(LC_EFORMAT, "the record has no \"messages\" (OpenAI), \"conversations\" (ShareGPT) or "
                     "\"prompt\"/\"completion\" field");
    if (!cJSON_IsString(p) || !cJSON_IsString(q))
      return lc_fail(LC_EFORMAT, "a prompt/completion record needs both \"prompt\" and \"completion\" as strings");
    c->from_completion = 1;
    LC_TRY(add(c, LC_ROLE_USER, p->valuestring));
    return add(c, LC_ROLE_ASSISTANT, q->valuestring);
  }
  const char *kr = sharegpt ? "from" : "role", *kc = sharegpt ? "value" : "content";
  const char *field = sharegpt ? "conversations" : "messages";
  if (!cJSON_IsArray(msgs)) return lc_fail(LC_EFORMAT, "\"%s\" is not a list of turns", field);
  if (cJSON_GetArraySize(msgs) == 0) return lc_fail(LC_EFORMAT, "\"%s\" is an empty list: the record has no turns", field);
  int i = 0;
  for (const cJSON *m = msgs->child; m; m = m->next, i++) {
    const cJSON *r = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, kr) : NULL;
    const cJSON *t = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, kc) : NULL;
    if (!cJSON_IsString(r) || !cJSON_IsString(t))
      return lc_fail(LC_EFORMAT, "turn %d of \"%s\" is not an object with string \"%s\" and \"%s\"", i + 1, field, kr, kc);
    const char *s = r->valuestring;
    lc_role role;
    if (!strcmp(s, "system")) role = LC_ROLE_SYSTEM;
    else if (!strcmp(s, "user") || (sharegpt && !strcmp(s, "human"))) role = LC_ROLE_USER;
    else if (!strcmp(s, "assistant") || (sharegpt && !strcmp(s, "gpt"))) role = LC_ROLE_ASSISTANT;
    else
      return lc_fail(LC_EFORMAT, "turn %d has the unknown %s \"%.40s\" (use %s)", i + 1, kr, s,
                     sharegpt ? "system, human or gpt" : "system, user or assistant");
    LC_TRY(add(c, role, t->valuestring));
  }
  return LC_OK;
}

lc_status lc_conv_parse(lc_conv *c, const char *json, size_t len) {
  memset(c, 0, sizeof *c);
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  for (const char *q = end; j && q && q < json + len; q++) // only whitespace may follow the object
    if (*q != ' ' && *q != '\t' && *q != '\f' && *q != '\v' && *q != '\r' && *q != '\n') {
      cJSON_Delete(j);
      j = NULL;
    }
  if (!j) return lc_fail(LC_EFORMAT, "not valid JSON; each line of a JSONL file must be one JSON object");
  lc_status st = parse(c, j);
  cJSON_Delete(j);
  return st;
}

void lc_conv_free(lc_conv *c) {
  for (int i = 0; i < c->n; i++) free(c->msgs[i].content);
  free(c->msgs);
  memset(c, 0, sizeof *c);
}

int lc_conv_n_assistant(const lc_conv *c) {
  int k = 0;
  for (int i = 0; i < c->n; i++) k += c->msgs[i].role == LC_ROLE_ASSISTANT;
  return k;
}
