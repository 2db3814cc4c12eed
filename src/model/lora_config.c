// The LoRA settings of a config: targets by name, the scale, the adapters' store config.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch.h"
#include "model/config.h"

static const char *const short_names[LC_LORA_N] = {"q", "k", "v", "o", "gate", "up", "down"};
static const char *const peft_names[LC_LORA_N] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

float lc_lora_scale(const lc_lora *l) {
  if (l->rank <= 0) return 0.0f;
  return l->rslora ? (float)(l->alpha / sqrt((double)l->rank)) : l->alpha / (float)l->rank;
}

lc_config lc_config_adapters(const lc_config *cfg) {
  lc_config a = *cfg;
  a.adapter_set = 1;
  return a;
}

long long lc_config_n_lora_params(const lc_config *cfg) {
  const lc_config a = lc_config_adapters(cfg);
  return a.lora.rank > 0 ? lc_config_n_params(&a) : 0;
}

lc_status lc_lora_parse_targets(const char *s, unsigned *targets) {
  *targets = 0;
  const char *p = s;
  while (p && *p) {
    const char *e = strchr(p, ',');
    const size_t n = e ? (size_t)(e - p) : strlen(p);
    int hit = -1;
    for (int i = 0; i < LC_LORA_N; i++)
      if ((strlen(short_names[i]) == n && !strncmp(p, short_names[i], n)) ||
          (strlen(peft_names[i]) == n && !strncmp(p, peft_names[i], n)))
        hit = i;
    if (n == 3 && !strncmp(p, "all", 3)) {
      *targets = LC_LORA_ALL;
      hit = 0;
    }
    if (hit < 0)
      return lc_fail(LC_EINVAL, "--lora-targets %s: '%.*s' is not a projection; give some of q,k,v,o,gate,up,down "
                     "(or all), comma-separated", s, (int)n, p);
    if (!(n == 3 && !strncmp(p, "all", 3))) *targets |= 1u << hit;
    p = e ? e + 1 : NULL;
  }
  if (!*targets) return lc_fail(LC_EINVAL, "--lora-targets is empty; give some of q,k,v,o,gate,up,down");
  return LC_OK;
}

const char *lc_lora_target_names(unsigned targets, int peft, char *buf, size_t cap) {
  size_t at = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; i < LC_LORA_N; i++)
    if (targets >> i & 1u) {
      const int w = snprintf(buf + at, at < cap ? cap - at : 0, "%s%s", at ? "," : "", peft ? peft_names[i] : short_names[i]);
      if (w > 0) at += (size_t)w;
    }
  return buf;
}

int lc_config_base_quant(const lc_config *cfg) {
  if (cfg->lora.rank <= 0 || cfg->adapter_set) return 0;
  if (cfg->base_q_embed || (cfg->base_q_head && !cfg->tie_embeddings)) return 1;
  for (int l = 0; l < cfg->n_layers && l < LC_MAX_LAYERS; l++)
    for (int p = 0; p < LC_LORA_N; p++)
      if (cfg->base_q[l][p]) return 1;
  return 0;
}
