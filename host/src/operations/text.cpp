#include "operations/text.hpp"

#include <algorithm>

namespace outbox::operations {

std::optional<std::size_t> utf8_length(std::string_view text) noexcept {
    std::size_t count = 0;
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        std::size_t width = 0;
        char32_t code = 0;
        if (lead < 0x80) {
            width = 1;
            code = lead;
        } else if ((lead & 0xE0) == 0xC0) {
            width = 2;
            code = lead & 0x1F;
        } else if ((lead & 0xF0) == 0xE0) {
            width = 3;
            code = lead & 0x0F;
        } else if ((lead & 0xF8) == 0xF0) {
            width = 4;
            code = lead & 0x07;
        } else {
            return std::nullopt;
        }
        if (i + width > text.size()) return std::nullopt;
        for (std::size_t k = 1; k < width; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return std::nullopt;
            code = (code << 6) | (next & 0x3F);
        }
        // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
        static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code < kMinimum[width] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return std::nullopt;
        i += width;
        ++count;
    }
    return count;
}

bool has_control_characters(std::string_view text) noexcept {
    return std::any_of(text.begin(), text.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte < 0x20 || byte == 0x7f;
    });
}

bool is_blank(std::string_view text) noexcept {
    return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t'; });
}

}  // namespace outbox::operations
