"""Japanese and Chinese pages for the tests' sandbox: what the search's CJK tests and benchmark crawl.

``CJK_PAGES`` are twenty short pages (ten Japanese, ten Chinese) of ordinary prose: cities,
landscapes, food, seasons, and Python documentation in the style of a tutorial, so that pages share
words (Python, 関数, 函数, 东京/東京 …) and a query must pick the right one. The text was written
for politecrawl (no outside source), and is in the public domain as the rest of the tests' data.

``cjk_host(ip)`` serves them (``<html lang>`` set per page) with a home page linking to all;
``known_item_queries`` draws, from each page's text, the phrases of 4 to 8 characters someone who
read it might search for (no spaces: one run of CJK letters each).
"""

from __future__ import annotations

import html
import random
import re

from .sandbox import Reply, SandboxHost

__all__ = ["CJK_PAGES", "cjk_host", "known_item_queries", "page_html"]

#: path -> (language, title, paragraphs)
CJK_PAGES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "/ja/tokyo.html": (
        "ja",
        "東京の街歩き",
        (
            "東京は日本の首都です。江戸時代には江戸と呼ばれ、明治維新の後に東京と改められました。",
            "浅草の雷門から隅田川沿いを歩くと、古い下町の雰囲気と高層ビルの眺めを同時に楽しめます。",
            "山手線に乗れば新宿、渋谷、池袋などの繁華街を一周することができます。",
        ),
    ),
    "/ja/kyoto.html": (
        "ja",
        "京都の寺と庭園",
        (
            "京都には千年以上の歴史を持つ寺社が数多く残っています。",
            "金閣寺の池に映る建物や、龍安寺の石庭は海外からの旅行者にも人気があります。",
            "春の桜と秋の紅葉の季節には、嵐山や東山の散歩道が観光客でにぎわいます。",
        ),
    ),
    "/ja/fuji.html": (
        "ja",
        "富士山に登る",
        (
            "富士山は標高三七七六メートルの日本一高い山で、静岡県と山梨県にまたがっています。",
            "登山道が開かれるのは七月上旬から九月上旬までの短い期間だけです。",
            "山頂で見るご来光を目指して、多くの登山者が夜のうちに山小屋を出発します。",
        ),
    ),
    "/ja/python-list.html": (
        "ja",
        "Pythonのリスト入門",
        (
            "リストは角括弧で囲んだ値の並びで、要素をあとから追加したり削除したりできます。",
            "appendメソッドは末尾に要素を一つ加え、insertメソッドは指定した位置に挿入します。",
            "スライスを使うと、リストの一部を取り出して新しいリストを作ることができます。",
        ),
    ),
    "/ja/python-dict.html": (
        "ja",
        "Pythonの辞書の使い方",
        (
            "辞書はキーと値の組を保存するデータ型で、波括弧を使って書きます。",
            "存在しないキーを参照すると例外が発生するため、getメソッドで既定値を指定すると安全です。",
            "itemsメソッドを使えば、キーと値を同時に取り出しながら繰り返し処理を書けます。",
        ),
    ),
    "/ja/python-functions.html": (
        "ja",
        "関数を定義する",
        (
            "関数はdef文で定義し、引数を受け取って結果をreturn文で返します。",
            "引数に既定値を与えておくと、呼び出すときにその引数を省略できます。",
            "同じ処理を何度も書く代わりに関数にまとめると、プログラムが読みやすくなります。",
        ),
    ),
    "/ja/python-exceptions.html": (
        "ja",
        "例外処理の基本",
        (
            "プログラムの実行中に起きたエラーは例外として扱われます。",
            "try文の中で発生した例外はexcept節で捕まえることができ、処理を続けられます。",
            "finally節に書いた処理は、例外が起きても起きなくても必ず実行されます。",
        ),
    ),
    "/ja/seasons.html": (
        "ja",
        "日本の四季",
        (
            "日本には春夏秋冬のはっきりした四つの季節があります。",
            "梅雨の時期には雨の日が続き、紫陽花が道端を彩ります。",
            "冬になると北海道や東北地方では雪が深く積もり、各地でスキー場が開かれます。",
        ),
    ),
    "/ja/sushi.html": (
        "ja",
        "寿司の話",
        (
            "寿司は酢飯に魚介類などを組み合わせた日本の伝統的な料理です。",
            "握り寿司は江戸の屋台で生まれた手早く食べられる料理だったと言われています。",
            "回転寿司の店では、好きな皿を自分で選んで手頃な値段で味わうことができます。",
        ),
    ),
    "/ja/shinkansen.html": (
        "ja",
        "新幹線の旅",
        (
            "新幹線は一九六四年に東京と新大阪の間で開業しました。",
            "最高速度は時速三百キロを超え、大きな事故のない安全な乗り物として知られています。",
            "駅弁を買って車窓から富士山を眺めるのは、東海道新幹線の楽しみの一つです。",
        ),
    ),
    "/zh/beijing.html": (
        "zh",
        "北京一日游",
        (
            "北京是中国的首都，也是一座有三千多年历史的古城。",
            "故宫位于城市的中心，是明清两代皇帝居住和处理政务的地方。",
            "傍晚可以去胡同里散步，品尝烤鸭和炸酱面等地道的北京小吃。",
        ),
    ),
    "/zh/great-wall.html": (
        "zh",
        "长城的历史",
        (
            "长城是古代中国为了抵御北方游牧民族而修建的军事防御工程。",
            "现在人们看到的长城大多是明朝时期重新修筑的。",
            "八达岭和慕田峪是离北京市区较近、游客最多的两段长城。",
        ),
    ),
    "/zh/panda.html": (
        "zh",
        "大熊猫的生活",
        (
            "大熊猫主要生活在四川、陕西和甘肃的山区竹林中。",
            "它们每天要花十几个小时吃竹子，成年大熊猫一天能吃掉几十公斤竹叶和竹笋。",
            "成都的大熊猫繁育研究基地是观察大熊猫的好去处。",
        ),
    ),
    "/zh/python-list.html": (
        "zh",
        "Python 列表入门",
        (
            "列表是用方括号括起来的一组元素，可以随时添加或删除其中的元素。",
            "append方法在列表末尾添加一个元素，insert方法则在指定位置插入元素。",
            "使用切片可以取出列表的一部分，并得到一个新的列表。",
        ),
    ),
    "/zh/python-dict.html": (
        "zh",
        "Python 字典用法",
        (
            "字典是一种保存键值对的数据类型，用花括号来表示。",
            "访问不存在的键会引发异常，所以用get方法并给出默认值更加安全。",
            "通过items方法可以在循环中同时取得键和值。",
        ),
    ),
    "/zh/python-functions.html": (
        "zh",
        "定义函数",
        (
            "函数用def语句定义，它接收参数并通过return语句返回结果。",
            "如果给参数设置默认值，调用函数时就可以省略这个参数。",
            "把重复的代码整理成函数，可以让程序更容易阅读和维护。",
        ),
    ),
    "/zh/python-exceptions.html": (
        "zh",
        "异常处理基础",
        (
            "程序运行时发生的错误会以异常的形式抛出。",
            "在try语句中引发的异常可以由except子句捕获，程序因此能够继续运行。",
            "写在finally子句中的代码无论是否发生异常都一定会执行。",
        ),
    ),
    "/zh/tea.html": (
        "zh",
        "中国茶文化",
        (
            "中国是茶的故乡，饮茶的习惯已经延续了几千年。",
            "绿茶、红茶、乌龙茶和普洱茶的制作方法各不相同，味道也各有特色。",
            "杭州西湖的龙井茶以色绿、香郁、味甘、形美而闻名。",
        ),
    ),
    "/zh/yangtze.html": (
        "zh",
        "长江之旅",
        (
            "长江是中国最长的河流，全长约六千三百公里。",
            "它发源于青藏高原，流经重庆、武汉和南京，最后在上海注入东海。",
            "乘船游览三峡，可以欣赏两岸陡峭的山峰和壮丽的风景。",
        ),
    ),
    "/zh/spring-festival.html": (
        "zh",
        "春节习俗",
        (
            "春节是农历新年，是中国人最重视的传统节日。",
            "除夕晚上全家人围坐在一起吃年夜饭，很多人还会守岁到深夜。",
            "人们在门上贴春联，给孩子发红包，并互相拜年表达祝福。",
        ),
    ),
}


def page_html(path: str) -> str:
    """The page at ``path`` as HTML: its language declared, a title, its paragraphs, a link home."""
    lang, title, paragraphs = CJK_PAGES[path]
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'</head><body><h1>{html.escape(title)}</h1>{body}<p><a href="/">Home</a></p></body></html>'
    )


def _home() -> str:
    links = "".join(f'<li><a href="{p}">{html.escape(t)}</a></li>' for p, (_, t, _) in CJK_PAGES.items())
    head = '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Index</title></head>'
    return f"{head}<body><ul>{links}</ul></body></html>"


def cjk_host(ip: str) -> SandboxHost:
    """A host on ``ip`` serving ``CJK_PAGES`` and a home page (``/``) that links to every one."""
    pages: dict[str, Reply | str] = {"/": _home()}
    pages.update((p, page_html(p)) for p in CJK_PAGES)
    return SandboxHost(ip, pages=pages)


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{4,}")


def known_item_queries(per_page: int = 6, seed: int = 51) -> list[tuple[str, str]]:
    """``(query, path)`` pairs: per page, ``per_page`` phrases of 4 to 8 characters cut at random
    from its paragraphs' runs of CJK letters (fixed seed), each with the page it was taken from."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for path, (_, _, paragraphs) in CJK_PAGES.items():
        runs = [m.group() for p in paragraphs for m in _CJK_RUN.finditer(p)]
        for _ in range(per_page):
            run = rng.choice(runs)
            size = rng.randint(4, min(8, len(run)))
            start = rng.randint(0, len(run) - size)
            out.append((run[start : start + size], path))
    return out
