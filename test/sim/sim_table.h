/*
 * Markdown tables for the simulator's report (README.md is generated from
 * this output by make_tables.sh).
 */
#ifndef RDRP_SIM_TABLE_H
#define RDRP_SIM_TABLE_H

#include <cstdio>
#include <string>
#include <vector>

namespace sim {

class Table {
public:
    explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
    void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
    void print(FILE *out = stdout) const
    {
        line(out, header_);
        std::vector<std::string> sep(header_.size(), "---:");
        sep[0] = "---";
        line(out, sep);
        for (const auto &r : rows_)
            line(out, r);
        std::fputc('\n', out);
    }

private:
    static void line(FILE *out, const std::vector<std::string> &cells)
    {
        std::fputc('|', out);
        for (const auto &c : cells)
            std::fprintf(out, " %s |", c.c_str());
        std::fputc('\n', out);
    }
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

inline std::string fmt(const char *f, double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

}  // namespace sim

#endif  // RDRP_SIM_TABLE_H
