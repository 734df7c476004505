"""The reply renderer never lets text through as HTML, and splits fenced code out."""

from app.ui.markdown import CodeSegment, TextSegment, render


def html_of(text):
    return "".join(s.html for s in render(text) if isinstance(s, TextSegment))


def test_model_text_is_escaped():
    out = html_of('<img src="x" onerror="alert(1)"> <b>not bold</b> & <script>x</script>')
    assert "<img" not in out and "<b>not" not in out and "<script>" not in out
    assert "&lt;img src=&quot;x&quot;" in out and "&amp;" in out


def test_markdown_inline_and_blocks():
    out = html_of("# Title\n\nSome **bold**, *it*, `a<b`, ~~s~~\n\n- one\n- two\n\n1. x\n2. y\n\n> quote")
    assert "<b>bold</b>" in out and "<i>it</i>" in out and "a&lt;b</code>" in out
    assert "<ul><li>one</li><li>two</li></ul>" in out and '<ol start="1">' in out
    assert "<blockquote>" in out and "<s>s</s>" in out and "Title</h3>" in out


def test_code_blocks_are_separate_and_raw():
    segs = render("before\n```python\nx = '<b>'\n```\nafter\n~~~\nunclosed <i>")
    kinds = [type(s).__name__ for s in segs]
    assert kinds == ["TextSegment", "CodeSegment", "TextSegment", "CodeSegment"]
    assert segs[1] == CodeSegment("python", "x = '<b>'", True)
    assert segs[3].code == "unclosed <i>" and not segs[3].closed


def test_links_only_http_and_escaped():
    out = html_of('[a](http://x.y/"q) [b](javascript:alert(1))')
    assert 'href="http://x.y/&quot;q"' in out
    assert "javascript:alert(1)" in out and 'href="javascript' not in out


def test_one_segment_per_block_so_streaming_redraws_only_the_last():
    segs = render("para one\nstill one\n\n- a\n- b\n\n# head\n\npara two")
    assert [s.html for s in segs] == [
        "<p>para one<br>still one</p>",
        "<ul><li>a</li><li>b</li></ul>",
        "<h3>head</h3>",
        "<p>para two</p>",
    ]
