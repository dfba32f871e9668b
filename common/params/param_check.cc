// Range and word checks of MCA parameter values (param_check.h).
#include "common/params/param_check.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// Open MPI reads integer text with strtoull(.., 0) and an optional k/m/g
// suffix, and takes anything else (a word: 0) without a complaint; we
// accept exactly the texts it reads as the number the user meant.
bool parse_integer(const char *s, bool allow_sign, long double *out)
{
    while (*s == ' ' || *s == '\t') ++s;
    bool neg = false;
    if (*s == '-' || *s == '+') {
        if (!allow_sign && *s == '-') return false;
        neg = *s == '-';
        ++s;
    }
    if (*s < '0' || *s > '9') return false;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 0);
    if (errno == ERANGE) return false;
    long double x = static_cast<long double>(v);
    switch (*end) {
    case 'g': case 'G': x *= 1024.0L; /* fall through */
    case 'm': case 'M': x *= 1024.0L; /* fall through */
    case 'k': case 'K': x *= 1024.0L; ++end; break;
    default: break;
    }
    while (*end == ' ' || *end == '\t') ++end;
    if (*end != '\0') return false;
    *out = neg ? -x : x;
    return true;
}

bool parse_double(const char *s, double *out)
{
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(s, &end);
    if (end == s || errno == ERANGE || !std::isfinite(v)) return false;
    while (*end == ' ' || *end == '\t') ++end;
    if (*end != '\0') return false;
    *out = v;
    return true;
}

// The items of words "a|b|c" (for ENUM and FLAGS "0=a|1=b"): number, word.
std::vector<std::pair<std::string, std::string>> split_words(const char *words)
{
    std::vector<std::pair<std::string, std::string>> out;
    std::string all(words ? words : "");
    size_t pos = 0;
    while (pos <= all.size()) {
        size_t bar = all.find('|', pos);
        std::string item = all.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos);
        size_t eq = item.find('=');
        if (!item.empty())
            out.emplace_back(eq == std::string::npos ? "" : item.substr(0, eq),
                             eq == std::string::npos ? item : item.substr(eq + 1));
        if (bar == std::string::npos) break;
        pos = bar + 1;
    }
    return out;
}

// Is w one of words (by word, or with numbers also by number)?
bool word_listed(const char *words, const std::string &w, bool numbers)
{
    for (const auto &nw : split_words(words)) {
        if (strcasecmp(nw.second.c_str(), w.c_str()) == 0) return true;
        if (numbers && !nw.first.empty() && nw.first == w) return true;
    }
    return false;
}

// The words joined by sep.
std::string join_words(const char *words, const char *sep)
{
    std::string out;
    for (const auto &nw : split_words(words)) out += (out.empty() ? "" : sep) + nw.second;
    return out;
}

bool enum_number_listed(const char *words, int v)
{
    return word_listed(words, std::to_string(v), true);
}

std::string fmt_double(double v)
{
    char b[64];
    if (v >= 9.2e18) return "any";
    std::snprintf(b, sizeof(b), "%.15g", v);
    return b;
}

void copy(char *dst, size_t len, const std::string &s)
{
    if (!len) return;
    std::snprintf(dst, len, "%s", s.c_str());
}

std::string describe(const rdrp_param_rule_t *r)
{
    switch (r->kind) {
    case RDRP_PARAM_INT:
    case RDRP_PARAM_DOUBLE:
        return fmt_double(r->lo) + ".." + fmt_double(r->hi);
    case RDRP_PARAM_ULL:
    case RDRP_PARAM_U32:
    case RDRP_PARAM_SIZE:
        return std::to_string(r->ulo) + ".." + std::to_string(r->uhi);
    case RDRP_PARAM_ENUM:
    case RDRP_PARAM_WORD:
        return join_words(r->words, " | ");
    case RDRP_PARAM_WORDS:
        return "a comma list of: " + join_words(r->words, " | ");
    case RDRP_PARAM_FLAGS: {
        std::string out = join_words(r->words, ",");
        return "a comma list of " + (out.empty() ? std::string("nothing (empty)") : out) +
               (r->ulo ? " including the required ones" : "");
    }
    }
    return "?";
}

// The stored value as text, and whether it lies in the rule's range.
bool stored_ok(const rdrp_param_rule_t *r, std::string *text)
{
    switch (r->kind) {
    case RDRP_PARAM_INT: {
        int v = *static_cast<const int *>(r->value);
        *text = std::to_string(v);
        return v >= r->lo && v <= r->hi;
    }
    case RDRP_PARAM_DOUBLE: {
        double v = *static_cast<const double *>(r->value);
        *text = fmt_double(v);
        return std::isfinite(v) && v >= r->lo && v <= r->hi;
    }
    case RDRP_PARAM_ULL: {
        unsigned long long v = *static_cast<const unsigned long long *>(r->value);
        *text = std::to_string(v);
        return v >= r->ulo && v <= r->uhi;
    }
    case RDRP_PARAM_U32: {
        unsigned v = *static_cast<const unsigned *>(r->value);
        *text = std::to_string(v);
        return v >= r->ulo && v <= r->uhi;
    }
    case RDRP_PARAM_SIZE: {
        size_t v = *static_cast<const size_t *>(r->value);
        *text = std::to_string(v);
        return v >= r->ulo && v <= r->uhi;
    }
    case RDRP_PARAM_FLAGS: {
        unsigned v = *static_cast<const unsigned *>(r->value);
        *text = std::to_string(v);
        return (v & ~static_cast<unsigned>(r->uhi)) == 0 && (v & r->ulo) == r->ulo;
    }
    case RDRP_PARAM_ENUM: {
        int v = *static_cast<const int *>(r->value);
        *text = std::to_string(v);
        return enum_number_listed(r->words, v);
    }
    case RDRP_PARAM_WORD:
    case RDRP_PARAM_WORDS: {
        const char *s = *static_cast<char *const *>(r->value);
        *text = s ? s : "";
        if (!s) return false;
        if (r->kind == RDRP_PARAM_WORD) return word_listed(r->words, s, false);
        // a comma (or blank) separated list, each item a listed word
        std::string all(s), item;
        bool any = false;
        for (size_t i = 0; i <= all.size(); ++i) {
            char c = i < all.size() ? all[i] : ',';
            if (c == ',' || c == ' ') {
                if (!item.empty()) {
                    if (!word_listed(r->words, item, false)) return false;
                    any = true;
                }
                item.clear();
            } else {
                item += c;
            }
        }
        return any;
    }
    }
    return false;
}

// The text the user gave: can Open MPI have read it as they meant?
bool text_ok(const rdrp_param_rule_t *r, const char *t)
{
    long double x;
    double d;
    switch (r->kind) {
    case RDRP_PARAM_INT:
        return parse_integer(t, true, &x) && x >= r->lo && x <= r->hi;
    case RDRP_PARAM_ULL:
    case RDRP_PARAM_U32:
    case RDRP_PARAM_SIZE:
        return parse_integer(t, false, &x) && x >= static_cast<long double>(r->ulo) &&
               x <= static_cast<long double>(r->uhi);
    case RDRP_PARAM_DOUBLE:
        return parse_double(t, &d) && d >= r->lo && d <= r->hi;
    case RDRP_PARAM_ENUM:
        return word_listed(r->words, t, true);
    case RDRP_PARAM_WORD:
    case RDRP_PARAM_WORDS:
        return true;  // Open MPI stores strings as given: the stored check decides
    case RDRP_PARAM_FLAGS: {
        // Open MPI refuses an unknown flag word but keeps the default: every
        // item must be an allowed word, or the whole text a number
        if (parse_integer(t, false, &x)) return x >= 0 && x <= 0xffffffffL &&
            (static_cast<unsigned long long>(x) & ~r->uhi) == 0;
        std::string all(t), item;
        for (size_t i = 0; i <= all.size(); ++i) {
            char c = i < all.size() ? all[i] : ',';
            if (c == ',') {
                if (!item.empty() && !word_listed(r->words, item, false)) return false;
                item.clear();
            } else if (c != ' ') {
                item += c;
            }
        }
        return true;
    }
    }
    return false;
}

}  // namespace

extern "C" void rdrp_param_describe(const rdrp_param_rule_t *rule, char *buf, size_t len)
{
    copy(buf, len, describe(rule));
}

extern "C" int rdrp_param_check(const rdrp_param_rule_t *rules, int n, const char *env_prefix,
                                rdrp_param_error_t *err)
{
    for (int i = 0; i < n; ++i) {
        const rdrp_param_rule_t *r = &rules[i];
        if (!r->name) continue;  // not filled in
        std::string shown;
        bool ok = stored_ok(r, &shown);
        const char *t = nullptr;
        if (env_prefix) {
            std::string var = std::string(env_prefix) + r->name;
            t = std::getenv(var.c_str());
        }
        const char *name = r->name;
        if (!ok && !t && env_prefix) {
            // a synonym (a second rule on the same storage) may be what the
            // user set: name that one
            for (int j = 0; j < n; ++j) {
                if (j == i || !rules[j].name || rules[j].value != r->value) continue;
                std::string var = std::string(env_prefix) + rules[j].name;
                if ((t = std::getenv(var.c_str())) != nullptr) {
                    name = rules[j].name;
                    break;
                }
            }
        }
        if (t && (!ok || !text_ok(r, t))) {
            ok = false;
            shown = t;  // what the user wrote, not what Open MPI made of it
        }
        if (!ok) {
            err->name = name;
            copy(err->value, sizeof(err->value), shown);
            copy(err->valid, sizeof(err->valid), describe(r));
            return i;
        }
    }
    return -1;
}

extern "C" const char *rdrp_param_help(const rdrp_param_rule_t *rules, int n, const char *prefix,
                                       const char *name, const char *help, char *buf, size_t len)
{
    std::string full = std::string(prefix ? prefix : "") + name;
    for (int i = 0; i < n; ++i) {
        if (rules[i].name && full == rules[i].name) {  // a table may be filled in as it registers
            copy(buf, len, std::string(help) + " (valid: " + describe(&rules[i]) + ")");
            return buf;
        }
    }
    copy(buf, len, help);
    return buf;
}
