"""Text helpers: LaTeX rendering, sentences, titles, links, lexical tokens."""

from rag.text import derive_title, find_links, latex_to_text, split_sentences, tokens


def test_latex_is_rendered_readable() -> None:
    assert latex_to_text(r"reducing cost by \textbf{9.7$\times$}") == "reducing cost by 9.7×"
    assert latex_to_text(r"\emph{exact unlearning} and $f(x)$") == "exact unlearning and f(x)"
    assert latex_to_text(r"Bridge--Garden, 50\% fewer") == "Bridge–Garden, 50% fewer"


def test_sentences_keep_abbreviations_and_decimals() -> None:
    text = "We use e.g. ImageNet. It gains 7.08 points. Code at https://x.org/a.b now."
    assert split_sentences(text) == ["We use e.g. ImageNet.", "It gains 7.08 points.", "Code at https://x.org/a.b now."]
    assert split_sentences("no sentence end here") == ["no sentence end here"]
    # A full stop glued to the next sentence (PDF paste) still ends one; names, domains and abbreviations do not.
    assert split_sentences("It is robust.This rank-guided step runs on MiniImageNet. See node.js at github.com/Ab "
                           "or e.g.Foo.") == ["It is robust.", "This rank-guided step runs on MiniImageNet.",
                                              "See node.js at github.com/Ab or e.g.Foo."]
    assert split_sentences("   ") == []


def test_title_prefers_the_named_method() -> None:
    abstract = ("In this work, we address retrieval. We produce SOLAR (Self-supervised jOint LeArning for symmetric "
                "multimodal Retrieval), a novel framework. It works.")
    assert derive_title(abstract) == "SOLAR: Self-supervised jOint LeArning for symmetric multimodal Retrieval"


def test_title_ignores_a_fields_own_acronym() -> None:
    abstract = "Reinforcement learning (RL) is popular. We study its limits on long tasks."
    assert derive_title(abstract).startswith("Reinforcement learning (RL) is popular")


def test_links_found_and_trimmed() -> None:
    assert find_links("Code: https://github.com/a/b. See github.com/c/d)") == (
        "https://github.com/a/b", "https://github.com/c/d")


def test_tokens_keep_numbers_and_acronyms_whole() -> None:
    toks = tokens("9.7× cheaper LLM-based R2G")
    assert "9.7x" in toks and "llm-based" in toks and "llm" in toks and "r2g" in toks
    assert "the" not in tokens("the method")


def test_a_name_introduced_by_proposing_or_our_method_titles_the_paper() -> None:
    assert derive_title("Robust RL matters. We close this gap by proposing a model-free algorithm, **Robust Halpern "
                        "Iteration (RHI)**. It converges.") == "RHI: Robust Halpern Iteration"
    assert derive_title("We study inversion on Lie groups. Our method, Transformation-Inverting Energy Diffusion "
                        "(TIED), relies on a new target.") == "TIED: Transformation-Inverting Energy Diffusion"
    # A field's own acronym is still no name.
    assert derive_title("Reinforcement learning (RL) is popular. Our method uses reinforcement learning (RL) well."
                        ) == "Reinforcement learning (RL) is popular"
